//! The writer thread: the one thread that writes the database, taking commands from a
//! channel and committing them in groups (group commit), each group in one durable
//! write transaction whose callers are answered only once its commit returned.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::{Database, WriteTransaction};

use crate::{Panicked, begin_durable, catch_panic};

/// Where a command goes when the writer takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Into the open group (a group is opened for it if none is).
    Group,
    /// To [`Apply::run`] at once, even while a group is open (a read of committed
    /// state, which the open group's callers cannot be waiting for).
    Now,
    /// To [`Apply::run`] on its own, once the open group is committed (a write that
    /// never shares a transaction).
    Alone,
}

/// How long an open group takes more commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Linger {
    /// Only the commands already waiting in the channel.
    Waiting,
    /// Until this long after its first command was added.
    For(Duration),
}

/// When a group is committed: once it weighs `max_weight` (0 counts as 1), or when its
/// [`Linger`] ends, whichever comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLimits {
    /// The weight ([`Group::add_weight`]) at which a group stops taking commands.
    pub max_weight: usize,
    /// How long a group takes more commands.
    pub linger: Linger,
}

/// What one group was, for the apply's logs and metrics.
#[derive(Debug, Clone, Copy)]
pub struct GroupStats {
    /// Commands added to the group.
    pub commands: usize,
    /// Answers it held until its commit ([`Group::wait`]).
    pub answers: usize,
    /// Its weight ([`Group::add_weight`]).
    pub weight: usize,
    /// When its transaction began.
    pub opened: Instant,
    /// When it stopped taking commands and its commit began.
    pub committing: Instant,
}

/// What the writer does after a panic of the apply (or of redb under it).
#[derive(Debug)]
pub enum AfterPanic<E> {
    /// Answer the open group's callers with this error and go on with the next command
    /// (in a new transaction: the panicked one is dropped, so aborted).
    Continue(E),
    /// Answer the open group's callers with this error and stop for good: the channel
    /// is closed, so later commands fail to send and queued ones are dropped unanswered.
    Stop(E),
}

/// What the writer thread applies: one store's commands, its group state and answers.
/// The writer calls these on its own thread only, so the apply is the database's
/// only writer.
pub trait Apply: Sized + Send + 'static {
    /// A request to the writer, usually with the channel its answer goes back on.
    type Command: Send + 'static;
    /// What an open group gathers besides its transaction (and its answers).
    type State: Default;
    /// A caller waiting for its group's commit ([`Group::wait`]).
    type Answer;
    /// Why a group (or a command) failed.
    type Error: From<redb::Error> + From<redb::CommitError>;

    /// Where `command` goes (the default: every command joins a group).
    fn route(&self, command: &Self::Command) -> Route {
        let _ = command;
        Route::Group
    }

    /// Runs and answers a command routed [`Route::Now`] or [`Route::Alone`] (the
    /// default, for an apply that routes nothing there, drops it unanswered).
    fn run(&mut self, command: Self::Command) {
        drop(command);
    }

    /// The database to begin a group's transaction in.
    fn database(&mut self) -> Result<&Database, Self::Error>;

    /// Answers `command`, for which no transaction could begin, with `error`.
    fn cannot_begin(&mut self, command: Self::Command, error: Self::Error);

    /// Adds `command` to the open group: writes it ([`Group::write`]) and waits for the
    /// commit ([`Group::wait`]), or answers it at once (a refusal that writes nothing).
    fn add(&mut self, group: &mut Group<'_, Self>, command: Self::Command);

    /// The group's last writes, just before its commit (the default: none).
    fn prepare(
        &mut self,
        txn: &WriteTransaction,
        state: &mut Self::State,
    ) -> Result<(), Self::Error> {
        let _ = (txn, state);
        Ok(())
    }

    /// The group committed (durably): called before its answers are sent.
    fn committed(&mut self, state: Self::State, stats: &GroupStats);

    /// The group did not commit (nothing of it is written): returns the error its
    /// answers are sent.
    fn not_committed(&mut self, error: Self::Error, stats: &GroupStats) -> Self::Error;

    /// Sends one waiting caller its answer: `Ok` once its group committed, the error
    /// otherwise.
    fn answer(&mut self, answer: Self::Answer, result: Result<(), &Self::Error>);

    /// The apply (or redb under it) panicked on the writer thread: what to do.
    fn panicked(&mut self, panic: Panicked) -> AfterPanic<Self::Error>;

    /// When [`due`](Self::due) is to run next, if ever (checked between groups).
    fn next_due(&self) -> Option<Instant> {
        None
    }

    /// Work that fell due (see [`next_due`](Self::next_due)), between groups.
    fn due(&mut self) {}

    /// The channel closed (every sender dropped): the last work before the thread ends.
    fn stopping(&mut self) {}
}

/// The open group: its durable transaction, the apply's state and the callers waiting
/// for its commit. Once one write failed the group is failed as a whole: later writes
/// are skipped and every waiting caller gets the error.
pub struct Group<'a, A: Apply> {
    txn: WriteTransaction,
    state: A::State,
    answers: &'a mut Vec<A::Answer>,
    error: Option<A::Error>,
    weight: usize,
    commands: usize,
    opened: Instant,
}

impl<A: Apply> Group<'_, A> {
    /// Runs `write` in the group's transaction unless an earlier write failed;
    /// `None` if it did or if this one fails (the group then fails as a whole).
    pub fn write<T>(
        &mut self,
        write: impl FnOnce(&WriteTransaction, &mut A::State) -> Result<T, A::Error>,
    ) -> Option<T> {
        if self.error.is_some() {
            return None;
        }
        match write(&self.txn, &mut self.state) {
            Ok(value) => Some(value),
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }

    /// The apply's state of this group.
    pub fn state(&mut self) -> &mut A::State {
        &mut self.state
    }

    /// Holds `answer` until the group's commit returned ([`Apply::answer`]).
    pub fn wait(&mut self, answer: A::Answer) {
        self.answers.push(answer);
    }

    /// Adds to the group's weight (see [`GroupLimits::max_weight`]).
    pub fn add_weight(&mut self, weight: usize) {
        self.weight = self.weight.saturating_add(weight);
    }
}

/// The handle of a writer thread: sends it commands; dropping it closes the channel
/// and waits for the thread to apply what was sent.
#[derive(Debug)]
pub struct Writer<C> {
    tx: Option<mpsc::Sender<C>>,
    thread: Option<JoinHandle<()>>,
}

impl<C: Send + 'static> Writer<C> {
    /// Starts the writer thread `name` applying commands with `apply`.
    pub fn start<A: Apply<Command = C>>(
        name: &str,
        limits: GroupLimits,
        apply: A,
    ) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || run(apply, &rx, limits))?;
        Ok(Writer {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Sends `command` to the writer; gives it back if the writer has stopped.
    pub fn send(&self, command: C) -> Result<(), C> {
        match &self.tx {
            Some(tx) => tx.send(command).map_err(|e| e.0),
            None => Err(command),
        }
    }

    /// Closes the channel and waits for the writer to apply what was sent and stop;
    /// an error if the thread itself died of a panic (one that even
    /// [`Apply::panicked`] did not survive).
    pub fn stop(&mut self) -> Result<(), Panicked> {
        self.tx.take();
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .map_err(|payload| Panicked::from_payload(payload.as_ref())),
            None => Ok(()),
        }
    }
}

impl<C> Drop for Writer<C> {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Whether the writer goes on.
enum Flow {
    Go,
    Stop,
}

/// The writer thread: one step (a command run alone, or one group) at a time, each
/// under the panic guard.
fn run<A: Apply>(mut apply: A, rx: &mpsc::Receiver<A::Command>, limits: GroupLimits) {
    let mut next = None;
    let mut answers = Vec::new();
    loop {
        match catch_panic(|| step(&mut apply, rx, limits, &mut next, &mut answers)) {
            Ok(Flow::Go) => {}
            Ok(Flow::Stop) => return,
            Err(panic) => {
                let after = catch_panic(|| {
                    let (error, flow) = match apply.panicked(panic) {
                        AfterPanic::Continue(e) => (e, Flow::Go),
                        AfterPanic::Stop(e) => (e, Flow::Stop),
                    };
                    for answer in answers.drain(..) {
                        apply.answer(answer, Err(&error));
                    }
                    flow
                });
                if !matches!(after, Ok(Flow::Go)) {
                    return;
                }
            }
        }
    }
}

/// Takes the next command and runs it alone, or opens a group with it, fills the
/// group within `limits` and commits it.
fn step<A: Apply>(
    apply: &mut A,
    rx: &mpsc::Receiver<A::Command>,
    limits: GroupLimits,
    next: &mut Option<A::Command>,
    answers: &mut Vec<A::Answer>,
) -> Flow {
    let Some(first) = next.take().or_else(|| next_command(apply, rx)) else {
        apply.stopping();
        return Flow::Stop;
    };
    if apply.route(&first) != Route::Group {
        apply.run(first);
        return Flow::Go;
    }
    let opened = Instant::now();
    let txn = match apply
        .database()
        .and_then(|db| begin_durable(db).map_err(A::Error::from))
    {
        Ok(txn) => txn,
        Err(e) => {
            apply.cannot_begin(first, e);
            return Flow::Go;
        }
    };
    let mut group = Group {
        txn,
        state: A::State::default(),
        answers,
        error: None,
        weight: 0,
        commands: 1,
        opened,
    };
    apply.add(&mut group, first);
    let deadline = match limits.linger {
        Linger::Waiting => None,
        Linger::For(delay) => Some(Instant::now() + delay),
    };
    while group.weight < limits.max_weight.max(1) {
        let command = match deadline {
            None => rx.try_recv().ok(),
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                rx.recv_timeout(deadline - now).ok()
            }
        };
        let Some(command) = command else { break };
        match apply.route(&command) {
            Route::Group => {
                group.commands += 1;
                apply.add(&mut group, command);
            }
            Route::Now => apply.run(command),
            Route::Alone => {
                *next = Some(command);
                break;
            }
        }
    }
    commit(apply, group);
    if apply.next_due().is_some_and(|due| due <= Instant::now()) {
        apply.due();
    }
    Flow::Go
}

/// The next command; runs [`Apply::due`] whenever it falls due while waiting. `None`
/// once every sender is gone.
fn next_command<A: Apply>(apply: &mut A, rx: &mpsc::Receiver<A::Command>) -> Option<A::Command> {
    loop {
        let Some(due) = apply.next_due() else {
            return rx.recv().ok();
        };
        match rx.recv_timeout(due.saturating_duration_since(Instant::now())) {
            Ok(command) => return Some(command),
            Err(mpsc::RecvTimeoutError::Timeout) => apply.due(),
            Err(mpsc::RecvTimeoutError::Disconnected) => return None,
        }
    }
}

/// Commits the group (the transaction is durable: its commit returns once the file is
/// fsynced) and only then answers its callers; a group nobody waits for is aborted.
fn commit<A: Apply>(apply: &mut A, group: Group<'_, A>) {
    let Group {
        txn,
        mut state,
        answers,
        error,
        weight,
        commands,
        opened,
    } = group;
    if answers.is_empty() {
        // Nothing to commit (every command was answered at once); an abort that
        // fails leaves nothing written either.
        let _ = txn.abort();
        return;
    }
    let committing = Instant::now();
    let result = match error {
        Some(e) => Err(e),
        None => apply
            .prepare(&txn, &mut state)
            .and_then(|()| txn.commit().map_err(A::Error::from)),
    };
    let stats = GroupStats {
        commands,
        answers: answers.len(),
        weight,
        opened,
        committing,
    };
    match result {
        Ok(()) => {
            apply.committed(state, &stats);
            for answer in answers.drain(..) {
                apply.answer(answer, Ok(()));
            }
        }
        Err(e) => {
            let error = apply.not_committed(e, &stats);
            for answer in answers.drain(..) {
                apply.answer(answer, Err(&error));
            }
        }
    }
}
