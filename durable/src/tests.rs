//! The writer's guarantees, with a counter store: every command answered once and only
//! after its group committed; a failed write fails its whole group; a panic is
//! answered, not hung.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use crate::{AfterPanic, Apply, Group, GroupLimits, GroupStats, Linger, Panicked, Writer};

const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");

/// What the writer did, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Added(u64),
    Committed,
    /// The answer to a command, with whether its write was readable from committed
    /// state when it was sent.
    Answered(u64, bool),
}

/// The command that makes the apply panic.
const PANICS: u64 = 1_000_000;

type Reply = mpsc::Sender<Result<u64, String>>;

/// Adds `.0` to the counter `"n"`; `u64::MAX` fails its write, [`PANICS`] panics.
struct Add(u64, Reply);

struct Counter {
    db: Arc<Database>,
    events: Arc<Mutex<Vec<Event>>>,
    after_panic: fn(redb::Error) -> AfterPanic<redb::Error>,
}

impl Counter {
    fn log(&self, event: Event) {
        self.events.lock().expect("events").push(event);
    }

    /// The counter in committed state.
    fn committed_value(&self) -> u64 {
        let txn = self.db.begin_read().expect("read");
        match txn.open_table(COUNTERS) {
            Ok(table) => table.get("n").expect("get").map_or(0, |v| v.value()),
            Err(_) => 0,
        }
    }
}

impl Apply for Counter {
    type Command = Add;
    type State = Vec<u64>;
    type Answer = (u64, Reply);
    type Error = redb::Error;

    fn database(&mut self) -> Result<&Database, redb::Error> {
        Ok(&self.db)
    }

    fn cannot_begin(&mut self, Add(_, reply): Add, error: redb::Error) {
        let _ = reply.send(Err(error.to_string()));
    }

    fn add(&mut self, group: &mut Group<'_, Self>, Add(n, reply): Add) {
        if n == PANICS {
            panic!("apply panicked");
        }
        self.log(Event::Added(n));
        group.add_weight(1);
        let value = group.write(|txn, added| {
            if n == u64::MAX {
                return Err(redb::Error::Io(std::io::Error::other("write refused")));
            }
            let mut table = txn.open_table(COUNTERS)?;
            let value = table.get("n")?.map_or(0, |v| v.value()) + n;
            table.insert("n", value)?;
            added.push(n);
            Ok(value)
        });
        group.wait((value.unwrap_or(0), reply));
    }

    fn committed(&mut self, _: Vec<u64>, _: &GroupStats) {
        self.log(Event::Committed);
    }

    fn not_committed(&mut self, error: redb::Error, _: &GroupStats) -> redb::Error {
        error
    }

    fn answer(&mut self, (value, reply): (u64, Reply), result: Result<(), &redb::Error>) {
        let visible = self.committed_value() >= value;
        self.log(Event::Answered(value, visible));
        let _ = reply.send(result.map(|()| value).map_err(|e| e.to_string()));
    }

    fn panicked(&mut self, panic: Panicked) -> AfterPanic<redb::Error> {
        let message = panic.message_or("no message");
        (self.after_panic)(redb::Error::Io(std::io::Error::other(message)))
    }
}

fn start(
    linger: Linger,
    after_panic: fn(redb::Error) -> AfterPanic<redb::Error>,
) -> (tempfile::TempDir, Writer<Add>, Arc<Mutex<Vec<Event>>>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(Database::create(dir.path().join("counter.redb")).expect("create"));
    let events = Arc::new(Mutex::new(Vec::new()));
    let counter = Counter {
        db,
        events: events.clone(),
        after_panic,
    };
    let limits = GroupLimits {
        max_weight: 1000,
        linger,
    };
    let writer = Writer::start("counter", limits, counter).expect("start");
    (dir, writer, events)
}

fn send(writer: &Writer<Add>, n: u64) -> mpsc::Receiver<Result<u64, String>> {
    let (reply, rx) = mpsc::channel();
    assert!(writer.send(Add(n, reply)).is_ok(), "the writer stopped");
    rx
}

fn answer(rx: &mpsc::Receiver<Result<u64, String>>) -> Result<u64, String> {
    rx.recv_timeout(Duration::from_secs(30))
        .expect("answered, not hung")
}

#[test]
fn group_commit_answers_every_command_once_after_its_commit() {
    let (_dir, writer, events) = start(Linger::For(Duration::from_millis(200)), AfterPanic::Stop);
    let replies: Vec<_> = (1..=20).map(|n| send(&writer, n)).collect();
    for rx in &replies {
        assert!(answer(rx).is_ok());
    }
    drop(writer);
    for rx in &replies {
        // Answered once: nothing more came, and the writer is gone.
        assert!(rx.try_recv().is_err());
    }
    let events = events.lock().expect("events").clone();
    let commits = events.iter().filter(|e| **e == Event::Committed).count();
    assert!(commits < 20, "grouped into fewer commits: {events:?}");
    let mut committed = true;
    let mut answered = 0;
    for event in &events {
        match event {
            Event::Added(_) => committed = false,
            Event::Committed => committed = true,
            Event::Answered(_, visible) => {
                assert!(
                    committed && *visible,
                    "answered before its commit: {events:?}"
                );
                answered += 1;
            }
        }
    }
    assert_eq!(answered, 20);
}

#[test]
fn a_failed_write_fails_its_whole_group_and_writes_nothing() {
    let (_dir, writer, events) = start(Linger::For(Duration::from_millis(200)), AfterPanic::Stop);
    let first = send(&writer, 5);
    let failing = send(&writer, u64::MAX);
    let after = send(&writer, 7);
    for rx in [&first, &failing, &after] {
        assert_eq!(answer(rx), Err("I/O error: write refused".to_string()));
    }
    assert_eq!(
        answer(&send(&writer, 1)),
        Ok(1),
        "nothing of the group was written"
    );
    assert!(
        !events
            .lock()
            .expect("events")
            .contains(&Event::Answered(5, true))
    );
}

#[test]
fn a_panic_in_apply_is_answered_and_the_writer_goes_on_when_told_to() {
    let (_dir, writer, _) = start(
        Linger::For(Duration::from_millis(200)),
        AfterPanic::Continue,
    );
    let before = send(&writer, 2);
    let panicking = send(&writer, PANICS);
    // The group open at the panic is answered with the panic, its write dropped.
    assert_eq!(
        answer(&before),
        Err("I/O error: apply panicked".to_string())
    );
    // The panicked command's reply went down with it: its caller learns at once.
    assert!(panicking.recv_timeout(Duration::from_secs(30)).is_err());
    assert_eq!(answer(&send(&writer, 3)), Ok(3));
}

#[test]
fn a_panic_in_apply_stops_the_writer_when_told_to() {
    let (_dir, writer, _) = start(Linger::Waiting, AfterPanic::Stop);
    let panicking = send(&writer, PANICS);
    // Its reply is dropped with the panicked command: the caller learns it at once.
    assert!(panicking.recv_timeout(Duration::from_secs(30)).is_err());
    let (reply, rx) = mpsc::channel();
    // Refused to send, or dropped unanswered: never left waiting.
    if writer.send(Add(1, reply)).is_ok() {
        assert!(rx.recv_timeout(Duration::from_secs(30)).is_err());
    }
}
