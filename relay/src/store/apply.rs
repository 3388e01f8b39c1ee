//! The commit thread's apply ([`RelayWriter`]: every waiting command in one durable
//! transaction, run by `ldpcov-durable`'s writer) and what it applies, one function
//! per command.

use super::*;

/// The relay's apply on the commit thread: the database, the device tag key, and the
/// write health it keeps.
pub(super) struct RelayWriter {
    pub(super) db: Arc<Database>,
    pub(super) path: PathBuf,
    pub(super) key: [u8; 32],
    pub(super) health: watch::Sender<bool>,
}

impl RelayWriter {
    /// A group that did not commit: logged, the health turned false.
    fn failed(&self, e: &StoreError, commands: usize, started: Instant) {
        tracing::error!(error = %e, commands, "relay store commit failed");
        self.health
            .send_if_modified(|h| std::mem::replace(h, false));
        metrics::histogram!("ldpcov_relay_commit_duration_seconds", "result" => "failed")
            .record(started.elapsed().as_secs_f64());
    }
}

impl Apply for RelayWriter {
    type Command = Command;
    type State = ();
    /// A command and what applying it produced (`None` once its group failed).
    type Answer = (Command, Option<Answer>);
    type Error = StoreError;

    fn database(&mut self) -> Result<&Database, StoreError> {
        Ok(&self.db)
    }

    fn cannot_begin(&mut self, command: Command, error: StoreError) {
        self.failed(&error, 1, Instant::now());
        command.fail(&error);
    }

    fn add(&mut self, group: &mut Group<'_, Self>, command: Command) {
        group.add_weight(1);
        let answer = group.write(|txn, ()| apply_one(txn, &self.key, &command));
        group.wait((command, answer));
    }

    fn committed(&mut self, (): (), stats: &GroupStats) {
        self.health
            .send_if_modified(|h| !std::mem::replace(h, true));
        metrics::histogram!("ldpcov_relay_commit_duration_seconds", "result" => "ok")
            .record(stats.opened.elapsed().as_secs_f64());
        metrics::histogram!("ldpcov_relay_commit_group_commands").record(stats.commands as f64);
    }

    fn not_committed(&mut self, error: StoreError, stats: &GroupStats) -> StoreError {
        self.failed(&error, stats.commands, stats.opened);
        error
    }

    fn answer(&mut self, (command, answer): Self::Answer, result: Result<(), &StoreError>) {
        let Err(e) = result else {
            return answer_committed(command, answer);
        };
        command.fail(e);
    }

    /// The database engine failed inside (a damaged file): the group fails as
    /// [`StoreError::Damaged`] and the next command begins a new transaction.
    fn panicked(&mut self, panic: Panicked) -> AfterPanic<StoreError> {
        let e = damaged(&self.path, &panic);
        self.failed(&e, 0, Instant::now());
        AfterPanic::Continue(e)
    }
}

/// Applies one command in the group's transaction.
fn apply_one(
    txn: &redb::WriteTransaction,
    key: &[u8; 32],
    command: &Command,
) -> Result<Answer, StoreError> {
    Ok(match command {
        Command::Submit(s, _) => Answer::Submit(apply_submit(txn, key, s)?),
        Command::FormDue(request, _) => Answer::FormDue(apply_form_due(txn, request)?),
        Command::Forwarded(seq, _) => Answer::Forwarded(apply_forwarded(txn, *seq)?),
        Command::Pin(pin, _) => Answer::Pin(apply_pin(txn, &pin.0, &pin.1)?),
        Command::PinKeys(keys, _) => Answer::PinKeys(apply_pin_keys(txn, &keys.0, &keys.1)?),
        Command::KeyConflict(id, now, _) => {
            apply_key_conflict(txn, id, *now)?;
            Answer::KeyConflict
        }
        Command::Retire(r, _) => Answer::Retire(apply_retire(txn, &r.0, r.1, r.2)?),
    })
}

/// Sends a command of a committed group what applying it produced.
fn answer_committed(command: Command, answer: Option<Answer>) {
    match (command, answer) {
        (Command::Submit(_, r), Some(Answer::Submit(v))) => drop(r.send(Ok(v))),
        (Command::FormDue(_, r), Some(Answer::FormDue(v))) => drop(r.send(Ok(v))),
        (Command::Forwarded(_, r), Some(Answer::Forwarded(v))) => drop(r.send(Ok(v))),
        (Command::Pin(_, r), Some(Answer::Pin(v))) => drop(r.send(Ok(v))),
        (Command::PinKeys(_, r), Some(Answer::PinKeys(v))) => drop(r.send(Ok(v))),
        (Command::KeyConflict(_, _, r), Some(Answer::KeyConflict)) => drop(r.send(Ok(()))),
        (Command::Retire(_, r), Some(Answer::Retire(v))) => drop(r.send(Ok(v))),
        _ => unreachable!("a committed group's answers follow their commands"),
    }
}

/// What applying a command produced, sent once its group committed.
pub(super) enum Answer {
    Submit(SubmitOutcome),
    FormDue(Vec<FormedBatch>),
    Forwarded(bool),
    Pin(PinnedSettings),
    PinKeys(Vec<(u32, [u8; 32])>),
    KeyConflict,
    Retire(Retired),
}

pub(super) fn apply_pin_keys(
    txn: &redb::WriteTransaction,
    id: &str,
    keys: &[(u32, [u8; 32])],
) -> Result<Vec<(u32, [u8; 32])>, StoreError> {
    let mut pinned = txn.open_table(PINNED_KEYS)?;
    let mut out = Vec::with_capacity(keys.len());
    for &(key_id, bytes) in keys {
        let existing = pinned.get((id, key_id))?.map(|v| v.value());
        match existing {
            Some(first) => out.push((key_id, first)),
            None => {
                pinned.insert((id, key_id), bytes)?;
                out.push((key_id, bytes));
            }
        }
    }
    Ok(out)
}

pub(super) fn apply_key_conflict(
    txn: &redb::WriteTransaction,
    id: &str,
    now: u64,
) -> Result<(), StoreError> {
    let mut conflicts = txn.open_table(KEY_CONFLICTS)?;
    let count = conflicts.get(id)?.map_or(0, |v| v.value().0);
    conflicts.insert(id, (count + 1, now))?;
    Ok(())
}

pub(super) fn decode_retired(v: (u64, u64, u64, u64)) -> Result<Retired, StoreError> {
    Ok(Retired {
        reason: RetireReason::from_code(v.0)?,
        at: v.1,
        window_reports: v.2,
        batch_reports: v.3,
    })
}

/// Drops a collection's open windows and stored batches and records it retired (the
/// first record stays: retiring again changes nothing).
pub(super) fn apply_retire(
    txn: &redb::WriteTransaction,
    id: &str,
    reason: RetireReason,
    now: u64,
) -> Result<Retired, StoreError> {
    let mut retired = txn.open_table(RETIRED)?;
    if let Some(existing) = retired.get(id)? {
        return decode_retired(existing.value());
    }
    let mut windows = txn.open_table(WINDOWS)?;
    let mut window_reports = 0;
    let mut keys = Vec::new();
    for row in windows.range((id, 0)..=(id, u32::MAX))? {
        let (key, bytes) = row?;
        window_reports += Window::decode(bytes.value())?.reports;
        keys.push(key.value().1);
    }
    for key_id in keys {
        windows.remove((id, key_id))?;
    }
    txn.open_table(WINDOW_REPORTS)?
        .retain_in((id, 0, 0)..=(id, u32::MAX, u64::MAX), |_, _| false)?;
    let mut batches = txn.open_table(BATCHES)?;
    let mut batch_reports = 0;
    let mut seqs = Vec::new();
    for row in batches.iter()? {
        let (seq, bytes) = row?;
        let b = decode_batch(seq.value(), bytes.value())?;
        if b.collection_id == id {
            batch_reports += b.size;
            seqs.push(b.seq);
        }
    }
    let mut formed = txn.open_table(BATCH_FORMED)?;
    let mut reports = txn.open_table(BATCH_REPORTS)?;
    for seq in seqs {
        batches.remove(seq)?;
        formed.remove(seq)?;
        reports.retain_in((seq, 0)..=(seq, u64::MAX), |_, _| false)?;
    }
    let record = Retired {
        reason,
        at: now,
        window_reports,
        batch_reports,
    };
    retired.insert(id, (reason.code(), now, window_reports, batch_reports))?;
    Ok(record)
}

pub(super) fn apply_pin(
    txn: &redb::WriteTransaction,
    id: &str,
    settings: &PinnedSettings,
) -> Result<PinnedSettings, StoreError> {
    let mut pins = txn.open_table(PINS)?;
    if let Some(existing) = pins.get(id)? {
        return Ok(PinnedSettings::decode(id, existing.value())?);
    }
    pins.insert(id, settings.encode().as_slice())?;
    Ok(settings.clone())
}

pub(super) fn apply_submit(
    txn: &redb::WriteTransaction,
    key: &[u8; 32],
    s: &Submission,
) -> Result<SubmitOutcome, StoreError> {
    let id = s.collection_id.as_str();
    let key_id = s.sealed.key_id;
    if txn.open_table(RETIRED)?.get(id)?.is_some() {
        return Ok(SubmitOutcome::Retired);
    }
    // The same sealed bytes, under any submission id or device: stored once.
    let digest = sealed_digest(&s.sealed);
    let mut ciphertexts = txn.open_table(CIPHERTEXTS)?;
    if ciphertexts.get((id, digest))?.is_some() {
        return Ok(SubmitOutcome::Duplicate);
    }
    let mut salts = txn.open_table(SALTS)?;
    let existing_salt = salts.get(id)?.map(|v| v.value());
    let mut devices = txn.open_table(DEVICES)?;
    if let Some(salt) = existing_salt {
        let tag = device_tag(key, &salt, &s.device);
        if let Some(previous) = devices.get((id, tag))? {
            // The same bytes were found above: the same submission id here carries others.
            return Ok(if previous.value() == s.submission_id {
                SubmitOutcome::SubmissionIdReused
            } else {
                SubmitOutcome::DeviceAlreadyReported
            });
        }
    }
    let mut windows = txn.open_table(WINDOWS)?;
    let existing = windows
        .get((id, key_id))?
        .map(|w| Window::decode(w.value()));
    let mut window = match existing {
        Some(w) => w?,
        None => Window {
            opened: s.now,
            rule: s.rule,
            reports: 0,
            next_position: 0,
            new_devices: 0,
        },
    };
    // New in this window: first seen now, or since the window opened.
    let mut seen = txn.open_table(DEVICES_SEEN)?;
    let seen_tag = first_seen_tag(key, &s.device);
    let first_seen = seen.get(seen_tag)?.map(|v| v.value());
    let new_device = first_seen.is_none_or(|at| at >= window.opened);
    if new_device && s.new_device_cap > 0 && window.new_devices >= s.new_device_cap {
        // Refused before anything is written: the transaction changes nothing.
        return Ok(SubmitOutcome::NewDeviceCapReached);
    }
    if first_seen.is_none() {
        seen.insert(seen_tag, s.now)?;
    }
    let salt = match existing_salt {
        Some(salt) => salt,
        None => {
            let mut salt = [0u8; 32];
            StdRng::from_os_rng().fill_bytes(&mut salt);
            salts.insert(id, salt)?;
            salt
        }
    };
    devices.insert((id, device_tag(key, &salt, &s.device)), s.submission_id)?;
    ciphertexts.insert((id, digest), ())?;
    txn.open_table(WINDOW_REPORTS)?.insert(
        (id, key_id, window.next_position),
        s.sealed.encode_to_vec().as_slice(),
    )?;
    window.next_position += 1;
    window.reports += 1;
    if new_device {
        window.new_devices += 1;
    }
    windows.insert((id, key_id), window.encode().as_slice())?;
    Ok(SubmitOutcome::Stored)
}

pub(super) fn apply_form_due(
    txn: &redb::WriteTransaction,
    request: &FormRequest,
) -> Result<Vec<FormedBatch>, StoreError> {
    let mut windows = txn.open_table(WINDOWS)?;
    let mut due = Vec::new();
    for row in windows.iter()? {
        let (key, bytes) = row?;
        let (id, key_id) = key.value();
        if request
            .only
            .as_ref()
            .is_some_and(|only| !only.iter().any(|o| o == id))
        {
            continue;
        }
        let window = Window::decode(bytes.value())?;
        if window.due(request.now, request.floor) {
            due.push((id.to_string(), key_id, window.new_devices));
        }
    }
    let mut formed = Vec::new();
    if due.is_empty() {
        return Ok(formed);
    }
    let mut meta = txn.open_table(META)?;
    let mut window_reports = txn.open_table(WINDOW_REPORTS)?;
    let mut batches = txn.open_table(BATCHES)?;
    let mut batch_reports = txn.open_table(BATCH_REPORTS)?;
    let mut formed_at = txn.open_table(BATCH_FORMED)?;
    let mut history = txn.open_table(BATCH_HISTORY)?;
    for (id, key_id, new_devices) in due {
        let id = id.as_str();
        let range = (id, key_id, 0)..=(id, key_id, u64::MAX);
        let mut reports: Vec<Vec<u8>> = Vec::new();
        for row in window_reports.range(range.clone())? {
            reports.push(row?.1.value().to_vec());
        }
        // A fresh OS-seeded CSPRNG per batch: the order and the id are unpredictable
        // to anyone who saw the arrivals.
        let mut rng = StdRng::from_os_rng();
        reports.shuffle(&mut rng);
        let mut batch_id = [0u8; 16];
        rng.fill_bytes(&mut batch_id);
        let seq = meta.get("next_batch_seq")?.map_or(0, |v| v.value());
        meta.insert("next_batch_seq", seq + 1)?;
        let size = reports.len() as u64;
        batches.insert(seq, encode_batch(&batch_id, size, id).as_slice())?;
        formed_at.insert(seq, request.now)?;
        history.insert((id, seq), (request.now, size, new_devices))?;
        for (i, report) in reports.iter().enumerate() {
            batch_reports.insert((seq, i as u64), report.as_slice())?;
        }
        window_reports.retain_in(range, |_, _| false)?;
        windows.remove((id, key_id))?;
        formed.push(FormedBatch {
            seq,
            collection_id: id.to_string(),
            batch_id,
            size,
        });
    }
    Ok(formed)
}

pub(super) fn apply_forwarded(txn: &redb::WriteTransaction, seq: u64) -> Result<bool, StoreError> {
    let mut batches = txn.open_table(BATCHES)?;
    let Some(batch) = batches.remove(seq)?.map(|b| decode_batch(seq, b.value())) else {
        return Ok(false);
    };
    let batch = batch?;
    txn.open_table(BATCH_FORMED)?.remove(seq)?;
    txn.open_table(BATCH_REPORTS)?
        .retain_in((seq, 0)..=(seq, u64::MAX), |_, _| false)?;
    let mut counters = txn.open_table(COUNTERS)?;
    let id = batch.collection_id.as_str();
    for (name, add) in [("forwarded_batches", 1), ("forwarded_reports", batch.size)] {
        let v = counters.get((id, name))?.map_or(0, |v| v.value());
        counters.insert((id, name), v + add)?;
    }
    Ok(true)
}
