//! Importers of recorded agent sessions into the conversation model.
