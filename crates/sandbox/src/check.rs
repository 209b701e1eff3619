//! The self-test of `whittle sandbox check` and `/sandbox`: three things a
//! confined command must not do, tried for real.

use crate::sandbox::Sandbox;
use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// One attempt and how it went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// What was tried, for people.
    pub attempt: String,
    /// Whether the sandbox stopped it.
    pub blocked: bool,
    /// Whether it must be stopped (a network connect need not be when the
    /// network is on by config).
    pub must_block: bool,
}

impl Finding {
    /// True when the outcome is the one the policy promises.
    pub fn passed(&self) -> bool {
        self.blocked || !self.must_block
    }
}

/// Why the self-test could not run at all.
#[derive(Debug, thiserror::Error)]
#[error("the self-test could not run: {0}")]
pub struct SelfTestError(String);

/// Tries, inside the sandbox with `workspace` as the working folder: a
/// write outside the workspace, a read of a file outside every visible
/// folder, and a TCP connect to a listener whittle opens on loopback.
pub fn self_test(sandbox: &Sandbox, workspace: &Path) -> Result<Vec<Finding>, SelfTestError> {
    let err = |e: &dyn std::fmt::Display| SelfTestError(e.to_string());
    let outside = tempfile::Builder::new()
        .prefix("whittle-check-")
        .tempdir_in(std::env::temp_dir())
        .map_err(|e| err(&e))?;
    let written = outside.path().join("written");
    let secret = outside.path().join("secret");
    let secret_text = format!("whittle-check-secret-{}", std::process::id());
    std::fs::write(&secret, &secret_text).map_err(|e| err(&e))?;
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| err(&e))?;
    let port = listener.local_addr().map_err(|e| err(&e))?.port();
    listener.set_nonblocking(true).map_err(|e| err(&e))?;

    let run = |script: &str, arg: &Path| -> Result<String, SelfTestError> {
        let out = sandbox
            .command("bash", ["-c", script, "check"])
            .map_err(|e| err(&e))?
            .arg(arg)
            .current_dir(workspace)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| err(&e))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };

    run("echo x > \"$1\"", &written)?;
    let write = Finding {
        attempt: format!("write {} (outside the workspace)", written.display()),
        blocked: !written.exists(),
        must_block: true,
    };
    let read_out = run("cat \"$1\"", &secret)?;
    let read = Finding {
        attempt: format!("read {} (a hidden path)", secret.display()),
        blocked: !read_out.contains(&secret_text),
        must_block: true,
    };
    let probe = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let connect_out = run(&probe, Path::new(""))?;
    // The kernel may take a moment to queue the connection.
    let mut accepted = false;
    for _ in 0..20 {
        if let Ok((mut stream, _)) = listener.accept() {
            let _ = stream.set_read_timeout(Some(Duration::from_millis(10)));
            let _ = stream.read(&mut [0u8; 1]);
            accepted = true;
            break;
        }
        if !connect_out.contains("connected") {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let network = Finding {
        attempt: format!("connect to 127.0.0.1:{port}"),
        blocked: !accepted && !connect_out.contains("connected"),
        must_block: sandbox.policy().is_some_and(|p| !p.network),
    };
    Ok(vec![write, read, network])
}
