//! `whittle-sandbox`: runs one command confined, for tests and for trying
//! a policy by hand without the agent.
//!
//! `whittle-sandbox [--read-only] [--network] [--write DIR]... [--read DIR]... -- CMD ARGS...`
//! confines CMD to the current folder as the workspace, with a private temp
//! folder, and exits with its exit code.

use std::path::PathBuf;
use std::process::ExitCode;
use whittle_sandbox::{Layout, Level, Sandbox, private_layers, private_tmp, run_helper_if_asked};

fn main() -> ExitCode {
    run_helper_if_asked();
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("whittle-sandbox: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let mut args = std::env::args().skip(1);
    let mut level = Level::WorkspaceWrite;
    let mut network = false;
    let (mut write, mut read) = (Vec::new(), Vec::new());
    let mut command = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--read-only" => level = Level::ReadOnly,
            "--network" => network = true,
            "--write" => write.push(PathBuf::from(args.next().ok_or("--write needs a folder")?)),
            "--read" => read.push(PathBuf::from(args.next().ok_or("--read needs a folder")?)),
            "--" => {
                command.extend(args.by_ref());
                break;
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?} (see the source's doc comment)"
                ));
            }
        }
    }
    let (program, rest) = command.split_first().ok_or("no command after --")?;
    let workspace = std::env::current_dir().map_err(|e| e.to_string())?;
    let tmp = private_tmp().map_err(|e| e.to_string())?;
    let layers = private_layers().map_err(|e| e.to_string())?;
    let env = |k: &str| std::env::var(k).ok();
    let policy = Layout {
        level,
        workspace,
        env: &env,
        writable_roots: write,
        read_roots: read,
        hidden: Vec::new(),
        network,
        tmp: Some(tmp.path().to_path_buf()),
        layers: Some(layers.path().to_path_buf()),
    }
    .policy()
    .map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let sandbox =
        Sandbox::confined(exe, policy, vec![tmp, layers], Vec::new()).map_err(|e| e.to_string())?;
    let status = sandbox
        .command(program, rest)
        .map_err(|e| e.to_string())?
        .status()
        .map_err(|e| e.to_string())?;
    for moved in sandbox.after_command() {
        eprintln!(
            "{}",
            moved.describe(&std::env::current_dir().unwrap_or_default())
        );
    }
    let code = status.code().unwrap_or(1);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
