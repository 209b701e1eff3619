//! Checkpoints in the loop: the workspace's files are saved before the
//! first tool of a turn that may write and after every such tool, so
//! `/rewind` can bring back any of those states. A snapshot that fails is
//! one warning and the turn goes on; a store that cannot be used (a
//! read-only disk) turns checkpoints off for the session, said once.

use super::Agent;
use super::error::AgentError;
use super::events::{AgentEvent, EventSink};
use crate::SessionKey;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use whittle_checkpoint::{
    Checkpoint, CheckpointError, CheckpointId, GcLimits, GcReport, Options, RestoreReport, Store,
};
use whittle_context::session::SessionRecord;

/// What `whittle checkpoint gc` and the session-start collection keep by
/// default: 2 GB of objects, 30 days.
pub const DEFAULT_GC_LIMITS: GcLimits = GcLimits {
    max_bytes: Some(2_000_000_000),
    max_age: Some(Duration::from_secs(30 * 24 * 60 * 60)),
};

/// The session-start collection runs at most this often per store.
const GC_EVERY: Duration = Duration::from_secs(24 * 60 * 60);

/// Where a workspace's checkpoints live. The sandbox keeps `.whittle/`
/// read-only to commands, so a command cannot rewrite its own undo.
pub fn checkpoint_store_dir(workspace: &Path) -> PathBuf {
    workspace.join(".whittle").join("checkpoints")
}

/// Why a workspace gets no checkpoints: its home folder or `/`, which a
/// snapshot would copy whole. `None` when it may have them.
pub fn checkpoints_refused(workspace: &Path) -> Option<&'static str> {
    let ws = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    if ws == Path::new("/") {
        return Some("the workspace is /");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from)?;
    let home = home.canonicalize().unwrap_or(home);
    (ws == home).then_some("the workspace is your home folder")
}

/// Who may use a workspace's checkpoint store: the person whose key made it.
#[derive(Clone, Copy, Debug, Default)]
pub struct StoreOwner<'a> {
    /// The person's key; without one, any store is used (tests, an account
    /// with no config folder).
    pub key: Option<&'a SessionKey>,
    /// The person said the folder's content is theirs: a store the key did
    /// not make is adopted, not set aside.
    pub trusted: bool,
}

/// A store opened, and where one whittle did not make was moved first.
pub struct OpenedStore {
    /// The store.
    pub store: Store,
    /// Where a store the key did not make went (`.whittle/quarantine/`),
    /// if one was there.
    pub set_aside: Option<PathBuf>,
}

/// The file in a store that names its owner: the key's seal of the
/// workspace.
const OWNER_FILE: &str = "owner";

/// Opens the workspace's store, after the checks the agent makes; files
/// over `max_file_size` bytes are listed, not kept.
///
/// A repository can ship `.whittle/checkpoints/`: records, trees and
/// objects of its author's choosing (a record dated in the future that
/// every snapshot diffs against, trees nested past any stack). The store
/// whittle makes holds the key's seal of the workspace; one without it, in
/// a folder not trusted, is moved aside whole to `.whittle/quarantine/`
/// (nothing is deleted) and a new store started.
pub fn open_checkpoint_store(
    workspace: &Path,
    max_file_size: u64,
    owner: StoreOwner<'_>,
) -> Result<OpenedStore, CheckpointError> {
    let options = Options {
        max_file_size,
        ..Options::default()
    };
    let dir = checkpoint_store_dir(workspace);
    let seal = owner
        .key
        .map(|key| key.seal_text("checkpoint store", &workspace.display().to_string()));
    let owned = seal.as_ref().is_none_or(|seal| {
        whittle_sandbox::read_regular_file(&dir.join(OWNER_FILE), 256)
            .is_ok_and(|bytes| bytes == seal.as_bytes())
    });
    let mut set_aside = None;
    if !owned && !owner.trusted && std::fs::symlink_metadata(&dir).is_ok() {
        let quarantine = workspace.join(".whittle").join("quarantine");
        let to = quarantine.join(format!(
            "checkpoints-{}",
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis())
        ));
        std::fs::create_dir_all(&quarantine)
            .and_then(|()| std::fs::rename(&dir, &to))
            .map_err(|source| CheckpointError::StoreUnusable {
                path: dir.clone(),
                source,
            })?;
        set_aside = Some(to);
    }
    // The owner first: another whittle starting here at the same moment
    // then finds a store that is the person's, not one to move aside.
    if let Some(seal) = seal.filter(|_| !owned) {
        let path = dir.join(OWNER_FILE);
        std::fs::create_dir_all(&dir)
            .and_then(|()| {
                whittle_store::write_atomic(&path, seal.as_bytes()).map_err(std::io::Error::other)
            })
            .map_err(|source| CheckpointError::StoreUnusable { path, source })?;
    }
    let store = Store::open(workspace, &dir, options)?;
    Ok(OpenedStore { store, set_aside })
}

/// The size over which a file is not kept, unless configured.
pub const DEFAULT_CHECKPOINT_MAX_FILE_SIZE: u64 = 16 * 1024 * 1024;

/// Collects with the default limits when the last collection is more than
/// a day old (or never ran); `None` when it was not due.
pub fn gc_if_due(store: &mut Store, workspace: &Path) -> Option<Result<GcReport, CheckpointError>> {
    let stamp = checkpoint_store_dir(workspace).join("last-gc");
    let due = std::fs::symlink_metadata(&stamp)
        .ok()
        .filter(|m| m.is_file())
        .and_then(|m| m.modified().ok())
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_none_or(|age| age > GC_EVERY);
    if !due {
        return None;
    }
    let result = store.gc(DEFAULT_GC_LIMITS);
    if result.is_ok() {
        // A stamp that cannot be written only means the next start collects
        // again; a link at its name is not followed (the stamp's write
        // would truncate whatever it points to).
        let _ = whittle_store::no_follow(
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true),
        )
        .open(&stamp);
    }
    Some(result)
}

/// The agent's side of the store.
#[derive(Default)]
pub(super) struct Checkpoints {
    state: State,
    /// Whether this turn's start was saved.
    turn_saved: bool,
    /// Files over this many bytes are listed, not kept.
    max_file_size: u64,
}

#[derive(Default)]
enum State {
    /// Not asked for (tests, subagents).
    #[default]
    Off,
    /// Asked for; opened at the first tool that may write.
    Wanted,
    Open(Box<Store>),
    /// Refused or unusable; said once.
    Gone,
}

impl Checkpoints {
    pub(super) fn new_turn(&mut self) {
        self.turn_saved = false;
    }
}

/// Runs `f` on the store off the async threads: a first snapshot of a big
/// workspace reads every file.
async fn with_store<T: Send + 'static>(
    store: Box<Store>,
    f: impl FnOnce(&mut Store) -> T + Send + 'static,
) -> Option<(Box<Store>, T)> {
    tokio::task::spawn_blocking(move || {
        let mut store = store;
        let out = f(&mut store);
        (store, out)
    })
    .await
    .ok()
}

impl Agent {
    /// Saves the workspace's files around every tool that may write, from
    /// now on (the CLI asks for it in every mode).
    pub fn with_checkpoints(mut self, max_file_size: u64) -> Self {
        self.checkpoints.state = State::Wanted;
        self.checkpoints.max_file_size = max_file_size;
        self
    }

    /// Whether the tool `name` may change files: checkpoints are made
    /// around it.
    pub(super) fn may_write(&self, name: &str) -> bool {
        if matches!(self.checkpoints.state, State::Off | State::Gone) {
            return false;
        }
        name == whittle_protocol::tool_names::TASK
            || self.tools.get(name).is_some_and(|t| !t.is_read_only())
    }

    /// Opens the store the first time it is needed; false when there is none.
    async fn ensure_store(&mut self, sink: &mut dyn EventSink) -> bool {
        match self.checkpoints.state {
            State::Open(_) => return true,
            State::Off | State::Gone => return false,
            State::Wanted => {}
        }
        let workspace = self.config.workspace.clone();
        if let Some(why) = checkpoints_refused(&workspace) {
            self.checkpoints.state = State::Gone;
            sink.on_event(AgentEvent::Warning(format!(
                "checkpoints are off: {why} (/rewind needs a project folder)"
            )));
            return false;
        }
        let max_file_size = self.checkpoints.max_file_size;
        let key = self.config.session_key.clone();
        let trusted = self.config.resume_unsealed;
        let opened = tokio::task::spawn_blocking(move || {
            let owner = StoreOwner {
                key: key.as_ref(),
                trusted,
            };
            let OpenedStore {
                mut store,
                set_aside,
            } = open_checkpoint_store(&workspace, max_file_size, owner)?;
            let gc = gc_if_due(&mut store, &workspace);
            Ok::<_, CheckpointError>((store, gc, set_aside))
        })
        .await;
        match opened {
            Ok(Ok((store, gc, set_aside))) => {
                if let Some(to) = set_aside {
                    sink.on_event(AgentEvent::Warning(format!(
                        "the checkpoint store in .whittle/ was not made by whittle under your account (did it come with the folder?): it was moved to {} and a new one started",
                        to.display()
                    )));
                }
                if let Some(Err(e)) = gc {
                    sink.on_event(AgentEvent::Warning(format!("checkpoint gc failed: {e}")));
                }
                self.checkpoints.state = State::Open(Box::new(store));
                true
            }
            Ok(Err(e)) => {
                self.checkpoints.state = State::Gone;
                sink.on_event(AgentEvent::Warning(format!(
                    "checkpoints are off for this session: {e}"
                )));
                false
            }
            Err(e) => {
                self.checkpoints.state = State::Gone;
                sink.on_event(AgentEvent::Warning(format!(
                    "checkpoints are off for this session: {e}"
                )));
                false
            }
        }
    }

    /// Saves the turn's start, before its first tool that may write.
    pub(super) async fn checkpoint_turn_start(
        &mut self,
        sink: &mut dyn EventSink,
    ) -> Result<(), AgentError> {
        if self.checkpoints.turn_saved {
            return Ok(());
        }
        self.checkpoints.turn_saved = true;
        self.checkpoint(None, None, sink).await.map(|_| ())
    }

    /// Saves the files after the tool call `call_id`.
    pub(super) async fn checkpoint_after(
        &mut self,
        call_id: &str,
        sink: &mut dyn EventSink,
    ) -> Result<(), AgentError> {
        self.checkpoint(Some(call_id), None, sink).await.map(|_| ())
    }

    /// One snapshot, logged. A failure is a warning; an unusable store
    /// turns checkpoints off. Only a log that cannot be written is an error.
    async fn checkpoint(
        &mut self,
        call_id: Option<&str>,
        note: Option<String>,
        sink: &mut dyn EventSink,
    ) -> Result<Option<Checkpoint>, AgentError> {
        if !self.ensure_store(sink).await {
            return Ok(None);
        }
        let State::Open(store) = std::mem::replace(&mut self.checkpoints.state, State::Gone) else {
            return Ok(None);
        };
        let label = call_id.map(str::to_string);
        let Some((store, result)) = with_store(store, move |s| s.snapshot(label.as_deref())).await
        else {
            sink.on_event(AgentEvent::Warning(
                "checkpoints are off for this session: a snapshot crashed".into(),
            ));
            return Ok(None);
        };
        match result {
            Ok(c) => {
                self.checkpoints.state = State::Open(store);
                self.log_checkpoint(&c, call_id, note, sink)?;
                Ok(Some(c))
            }
            Err(e @ CheckpointError::StoreUnusable { .. }) => {
                sink.on_event(AgentEvent::Warning(format!(
                    "checkpoints are off for this session: {e}"
                )));
                Ok(None)
            }
            Err(e) => {
                self.checkpoints.state = State::Open(store);
                sink.on_event(AgentEvent::Warning(format!("no checkpoint made: {e}")));
                Ok(None)
            }
        }
    }

    fn log_checkpoint(
        &mut self,
        c: &Checkpoint,
        call_id: Option<&str>,
        note: Option<String>,
        sink: &mut dyn EventSink,
    ) -> Result<(), AgentError> {
        self.log(SessionRecord::Checkpoint {
            id: c.id.to_string(),
            tool_call_id: call_id.map(str::to_string),
            unix_ms: c.unix_ms,
            files_changed: c.stat.files_changed,
            insertions: c.stat.insertions,
            deletions: c.stat.deletions,
            note,
        })?;
        sink.on_event(AgentEvent::Checkpoint {
            id: c.id.to_string(),
            tool_call_id: call_id.map(str::to_string),
            files_changed: c.stat.files_changed,
            insertions: c.stat.insertions,
            deletions: c.stat.deletions,
        });
        Ok(())
    }

    /// Makes the workspace's files as they were at checkpoint `id`; the
    /// state just before is saved and logged, so the restore can be undone.
    pub async fn restore_checkpoint(
        &mut self,
        id: &str,
        sink: &mut dyn EventSink,
    ) -> Result<RestoreReport, AgentError> {
        let id: CheckpointId = id.parse().map_err(AgentError::Checkpoint)?;
        if !self.ensure_store(sink).await {
            return Err(AgentError::Checkpoint(CheckpointError::NotFound(
                "(checkpoints are off in this session)".into(),
            )));
        }
        let State::Open(store) = std::mem::replace(&mut self.checkpoints.state, State::Gone) else {
            return Err(AgentError::Checkpoint(CheckpointError::NotFound(
                id.to_string(),
            )));
        };
        let target = id.clone();
        let Some((store, result)) = with_store(store, move |s| s.restore(&target)).await else {
            return Err(AgentError::Checkpoint(CheckpointError::Corrupt(
                "a restore crashed".into(),
            )));
        };
        self.checkpoints.state = State::Open(store);
        let report = result.map_err(AgentError::Checkpoint)?;
        self.log_checkpoint(
            &report.before,
            None,
            Some(format!("before rewinding to {id}")),
            sink,
        )?;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_the_key_did_not_make_is_set_aside_unless_trusted() {
        let root = tempfile::tempdir().unwrap();
        let key = SessionKey::load_or_create(&root.path().join("key")).unwrap();
        let ws = root.path().join("ws");
        let shipped = checkpoint_store_dir(&ws).join("checkpoints");
        std::fs::create_dir_all(&shipped).unwrap();
        std::fs::write(shipped.join("ffffffffffffffff"), "from the repository").unwrap();
        let owner = StoreOwner {
            key: Some(&key),
            trusted: false,
        };
        let opened = open_checkpoint_store(&ws, DEFAULT_CHECKPOINT_MAX_FILE_SIZE, owner).unwrap();
        let to = opened.set_aside.unwrap();
        assert!(to.starts_with(ws.join(".whittle/quarantine")), "{to:?}");
        assert_eq!(
            std::fs::read_to_string(to.join("checkpoints/ffffffffffffffff")).unwrap(),
            "from the repository",
            "moved whole, nothing deleted"
        );
        assert!(!shipped.join("ffffffffffffffff").exists());
        drop(opened.store);
        // The new store is the person's: opened again, it stays.
        let again = open_checkpoint_store(&ws, DEFAULT_CHECKPOINT_MAX_FILE_SIZE, owner).unwrap();
        assert!(again.set_aside.is_none());
        drop(again.store);
        // Another key's store is not: set aside again.
        let other = SessionKey::load_or_create(&root.path().join("other")).unwrap();
        let theirs = StoreOwner {
            key: Some(&other),
            trusted: false,
        };
        let opened = open_checkpoint_store(&ws, DEFAULT_CHECKPOINT_MAX_FILE_SIZE, theirs).unwrap();
        assert!(opened.set_aside.is_some());
        drop(opened.store);
        // In a trusted folder a store is adopted as it is.
        std::fs::write(shipped.join("ffffffffffffffff"), "from the repository").unwrap();
        let trusted = StoreOwner {
            key: Some(&key),
            trusted: true,
        };
        let opened = open_checkpoint_store(&ws, DEFAULT_CHECKPOINT_MAX_FILE_SIZE, trusted).unwrap();
        assert!(opened.set_aside.is_none());
        assert!(shipped.join("ffffffffffffffff").exists());
        drop(opened.store);
        let opened = open_checkpoint_store(&ws, DEFAULT_CHECKPOINT_MAX_FILE_SIZE, owner).unwrap();
        assert!(opened.set_aside.is_none(), "adopted: now the person's");
    }

    #[test]
    fn a_link_at_the_collection_stamp_is_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let victim = root.path().join("victim");
        std::fs::write(&victim, "mine").unwrap();
        let mut store =
            open_checkpoint_store(&ws, DEFAULT_CHECKPOINT_MAX_FILE_SIZE, StoreOwner::default())
                .unwrap()
                .store;
        let stamp = checkpoint_store_dir(&ws).join("last-gc");
        std::os::unix::fs::symlink(&victim, &stamp).unwrap();
        assert!(gc_if_due(&mut store, &ws).unwrap().is_ok());
        assert_eq!(std::fs::read(&victim).unwrap(), b"mine");
        // Without the link the stamp is written, and the next start skips.
        std::fs::remove_file(&stamp).unwrap();
        assert!(gc_if_due(&mut store, &ws).unwrap().is_ok());
        assert!(stamp.is_file());
        assert!(gc_if_due(&mut store, &ws).is_none());
    }
}
