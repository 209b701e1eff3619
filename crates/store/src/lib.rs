//! The on-disk store of whittle: persisted tool outputs and transcripts, so
//! that what compaction takes out of the context can always be read back.
//!
//! The tools that save their outputs while they run and the compaction
//! engine that saves old results both write here, and nothing else: the
//! store is below both, so a tool needs neither the pipeline nor the ledger
//! to keep an output whole. Every file name derived from an id is
//! sanitized, a path read out of a marker is trusted only if it resolves
//! inside the store, and each piece of content is written once.
//!
//! ```
//! use whittle_protocol::Block;
//! use whittle_store::{Preview, Store, persisted_output};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::new(dir.path());
//! let output = "line\n".repeat(10_000);
//! let saved = store.persist_tool_result("toolu_1", &output)?;
//! assert_eq!(Store::read_persisted(&saved.path)?, output);
//!
//! // The marker left in the context names the file, and only the store
//! // decides whether a marker's path is one of its own.
//! let marker = persisted_output(&saved.path, &Preview::head(&output, 20), None);
//! let Block::ToolResult(result) = Block::tool_result("toolu_1", marker, false) else {
//!     unreachable!()
//! };
//! assert_eq!(store.saved_path(&result), Some(saved.path));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod atomic;
mod error;
mod hash;
mod no_follow;
mod output;
mod placeholder;
mod saved;
mod store;
mod transcript;

pub use atomic::{write_atomic, write_atomic_with_permissions};
pub use error::StoreError;
pub use hash::ContentHash;
pub use no_follow::no_follow;
pub use output::{CapturedOutput, OutputWriter};
pub use placeholder::{
    Preview, is_saved_placeholder, looks_saved, path_text, persisted_output, saved_path_text,
    saved_placeholder,
};
pub use saved::{SavedMismatch, SavedOutput};
pub use store::Store;
pub use transcript::{ArchivedSpan, WrittenLine};
