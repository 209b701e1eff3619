//! Every integration test of whittle-local in one binary, so the suite
//! links once: a module per file, as before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod gguf_file;
mod kernels;
mod smollm2;
mod tiny_model;
