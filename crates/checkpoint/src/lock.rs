use crate::error::CheckpointError;
use std::fs::{File, OpenOptions};
use std::path::Path;

/// An advisory lock on the store's `lock` file, held for one operation:
/// exclusive to change the store (snapshot, restore, gc), shared to read
/// it. Two processes (or two `Store`s) on one store take turns; the OS
/// drops the lock if a holder dies.
pub(crate) struct StoreLock {
    file: File,
}

impl StoreLock {
    pub(crate) fn exclusive(store: &Path) -> Result<StoreLock, CheckpointError> {
        let file = Self::open(store)?;
        file.lock()
            .map_err(CheckpointError::store(store.join("lock")))?;
        Ok(StoreLock { file })
    }

    pub(crate) fn shared(store: &Path) -> Result<StoreLock, CheckpointError> {
        let file = Self::open(store)?;
        file.lock_shared()
            .map_err(CheckpointError::store(store.join("lock")))?;
        Ok(StoreLock { file })
    }

    fn open(store: &Path) -> Result<File, CheckpointError> {
        let path = store.join("lock");
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(CheckpointError::store(path))
    }
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}
