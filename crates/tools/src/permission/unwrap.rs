//! What a shell command line will run: parsed commands with leading
//! assignments, wrappers (`env`, `timeout`, `nohup`, `xargs`, ...) and nested
//! scripts (`bash -c`, `eval`, `find -exec`) unwrapped into [`Segment`]s, which
//! the rules in the sibling modules classify as never-allowed, destructive or
//! read-only.

use super::deny::is_fork_bomb;
use super::segment::{Segment, program_name};
use whittle_shell::{self as shell, Parsed, SimpleCommand, is_assignment};

/// A command line split into what will run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Analysis {
    pub segments: Vec<Segment>,
    /// Why parsing was incomplete, if it was.
    pub problem: Option<String>,
    /// True when some script level contains a fork bomb written as code.
    pub fork_bomb: bool,
    /// A variable set for a command (`LESSOPEN=... less`, `env PAGER=...`)
    /// that makes programs run another program: read-only mode refuses it.
    pub program_var: Option<String>,
}

/// Variables that name a program another program runs (pagers, editors,
/// preprocessors, git's helpers) or code a shell or interpreter loads.
const PROGRAM_VARS: &[&str] = &[
    "LESSOPEN",
    "LESSCLOSE",
    "LESSEDIT",
    "PAGER",
    "MANPAGER",
    "GIT_PAGER",
    "EDITOR",
    "VISUAL",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_EXTERNAL_DIFF",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_GLOBAL",
    "GIT_DIR",
    "GIT_EXEC_PATH",
    "GIT_TEMPLATE_DIR",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PERL5OPT",
    "PERL5LIB",
    "NODE_OPTIONS",
    "RUBYOPT",
    "PATH",
];

/// The first word of `words` that sets one of [`PROGRAM_VARS`].
fn program_var(words: &[String]) -> Option<String> {
    words.iter().find_map(|w| {
        let (name, _) = w.split_once('=')?;
        (is_assignment(w) && PROGRAM_VARS.contains(&name)).then(|| name.to_owned())
    })
}

/// Shells, which run the script given with `-c` (and, fed by a pipe, stdin).
pub(super) const SHELLS: &[&str] = &[
    "bash", "sh", "zsh", "dash", "ksh", "mksh", "ash", "fish", "busybox",
];

/// Splits and unwraps a command line.
pub(crate) fn analyze(src: &str) -> Analysis {
    let parsed = shell::parse(src);
    let mut out = Analysis {
        segments: Vec::new(),
        problem: parsed.problem.clone(),
        fork_bomb: false,
        program_var: None,
    };
    collect(&parsed, 0, &mut out);
    out
}

fn collect(parsed: &Parsed, depth: usize, out: &mut Analysis) {
    out.fork_bomb |= parsed.unquoted.iter().any(|s| is_fork_bomb(s));
    for cmd in &parsed.commands {
        unwrap_command(cmd, depth, out);
    }
}

/// Words that start or end compound commands rather than run anything.
const KEYWORDS: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "esac", "in",
];

fn unwrap_command(cmd: &SimpleCommand, depth: usize, out: &mut Analysis) {
    if depth > shell::MAX_DEPTH {
        // `find -exec find -exec ...`: refuse rather than recurse without end.
        out.problem
            .get_or_insert_with(|| "commands are nested too deeply".to_owned());
        return;
    }
    if out.program_var.is_none() {
        out.program_var = program_var(&cmd.words);
    }
    let mut start = 0;
    while start < cmd.words.len()
        && (is_assignment(&cmd.words[start]) || KEYWORDS.contains(&cmd.words[start].as_str()))
    {
        start += 1;
    }
    let words = &cmd.words[start..];
    if let Some(first) = words.first()
        && matches!(first.as_str(), "for" | "case" | "select" | "function")
    {
        return;
    }
    let text = words.join(" ");
    if words.is_empty() {
        if !cmd.redirects.is_empty() {
            out.segments.push(Segment {
                text,
                argv: Vec::new(),
                redirects: cmd.redirects.clone(),
                piped_in: cmd.piped_in,
            });
        }
        return;
    }
    let mut argv: Vec<String> = words.to_vec();
    let mut hops = 0;
    loop {
        hops += 1;
        if hops > 16 {
            break;
        }
        match unwrap_once(&argv) {
            Unwrapped::Run => break,
            Unwrapped::Inner(inner) => {
                if inner.is_empty() {
                    break;
                }
                argv = inner;
            }
            Unwrapped::Script(script) => {
                // The wrapper itself runs nothing risky; the script does.
                out.segments.push(Segment {
                    text: text.clone(),
                    argv: Vec::new(),
                    redirects: cmd.redirects.clone(),
                    piped_in: cmd.piped_in,
                });
                nested(&script, depth, out);
                return;
            }
            Unwrapped::WithExec { own, exec } => {
                out.segments.push(Segment {
                    text: text.clone(),
                    argv: own,
                    redirects: cmd.redirects.clone(),
                    piped_in: cmd.piped_in,
                });
                let inner = SimpleCommand {
                    words: exec,
                    redirects: Vec::new(),
                    piped_in: false,
                };
                unwrap_command(&inner, depth + 1, out);
                return;
            }
        }
    }
    out.segments.push(Segment {
        text,
        argv,
        redirects: cmd.redirects.clone(),
        piped_in: cmd.piped_in,
    });
}

fn nested(script: &str, depth: usize, out: &mut Analysis) {
    if depth + 1 > shell::MAX_DEPTH {
        out.problem
            .get_or_insert_with(|| "commands are nested too deeply".to_owned());
        return;
    }
    let mut parsed = Parsed::default();
    shell::parse_into(script, depth + 1, &mut parsed);
    if let Some(p) = parsed.problem.take() {
        out.problem.get_or_insert(p);
    }
    collect(&parsed, depth + 1, out);
}

enum Unwrapped {
    /// argv runs as it is.
    Run,
    /// argv is a wrapper around this command.
    Inner(Vec<String>),
    /// argv runs this shell script.
    Script(String),
    /// argv runs itself and, for each input, this command (`find -exec`).
    WithExec { own: Vec<String>, exec: Vec<String> },
}

/// Index of the first argument after options; `with_value` options take the
/// next word (unless written `--opt=value` or `-Xvalue`).
fn skip_options(args: &[String], with_value: &[&str]) -> usize {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            return i + 1;
        }
        if !a.starts_with('-') || a == "-" {
            return i;
        }
        i += 1;
        if with_value.contains(&a) {
            i += 1;
        }
    }
    i
}

fn unwrap_once(argv: &[String]) -> Unwrapped {
    let name = program_name(&argv[0]);
    let args = &argv[1..];
    let inner = |from: usize| Unwrapped::Inner(args.get(from..).unwrap_or_default().to_vec());
    match name {
        "env" => {
            let mut i = 0;
            while i < args.len() {
                let a = args[i].as_str();
                if a == "-S" || a == "--split-string" {
                    return match args.get(i + 1) {
                        Some(s) => Unwrapped::Script(s.clone()),
                        None => Unwrapped::Run,
                    };
                }
                if let Some(s) = a.strip_prefix("--split-string=") {
                    return Unwrapped::Script(s.to_owned());
                }
                if matches!(a, "-u" | "--unset" | "-C" | "--chdir") {
                    i += 2;
                } else if a.starts_with('-') || is_assignment(a) {
                    i += 1;
                } else {
                    break;
                }
            }
            if i >= args.len() {
                Unwrapped::Run
            } else {
                inner(i)
            }
        }
        "nohup" | "builtin" | "unbuffer" | "exec" | "setsid" | "time" => {
            inner(skip_options(args, &["-a"]))
        }
        "command" => {
            if args
                .iter()
                .take_while(|a| a.starts_with('-'))
                .any(|a| a.contains('v') || a.contains('V'))
            {
                Unwrapped::Run
            } else {
                inner(skip_options(args, &[]))
            }
        }
        "nice" => inner(skip_options(args, &["-n", "--adjustment"])),
        "ionice" => inner(skip_options(
            args,
            &["-c", "-n", "-p", "--class", "--classdata"],
        )),
        "stdbuf" => inner(skip_options(args, &["-i", "-o", "-e"])),
        "timeout" => {
            let i = skip_options(args, &["-s", "--signal", "-k", "--kill-after"]);
            inner(i + 1)
        }
        "watch" => {
            let i = skip_options(args, &["-n", "--interval", "-d", "--differences"]);
            if args.iter().any(|a| a == "-x" || a == "--exec") {
                inner(i)
            } else {
                Unwrapped::Script(args.get(i..).unwrap_or_default().join(" "))
            }
        }
        "xargs" => {
            let i = skip_options(
                args,
                &[
                    "-I",
                    "-L",
                    "-n",
                    "-P",
                    "-s",
                    "-d",
                    "-E",
                    "-a",
                    "--arg-file",
                    "--delimiter",
                    "--max-args",
                    "--max-procs",
                    "--max-lines",
                ],
            );
            if i >= args.len() {
                Unwrapped::Inner(vec!["echo".to_owned()])
            } else {
                inner(i)
            }
        }
        "eval" => Unwrapped::Script(args.join(" ")),
        "find" => {
            let at = args
                .iter()
                .position(|a| matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"));
            match at {
                None => Unwrapped::Run,
                Some(at) => {
                    let rest = &args[at + 1..];
                    let end = rest
                        .iter()
                        .position(|a| a == ";" || a == "+")
                        .unwrap_or(rest.len());
                    let mut own = argv[..=at].to_vec();
                    own.extend(rest.get(end + 1..).unwrap_or_default().iter().cloned());
                    Unwrapped::WithExec {
                        own,
                        exec: rest[..end].to_vec(),
                    }
                }
            }
        }
        n if SHELLS.contains(&n) => shell_script(args),
        _ => Unwrapped::Run,
    }
}

/// `bash -c SCRIPT` (also `-lc`, `-ec`, ...) runs SCRIPT.
fn shell_script(args: &[String]) -> Unwrapped {
    let mut has_c = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "-o" || a == "+o" {
            i += 2;
            continue;
        }
        if a.starts_with("--") {
            i += 1;
            continue;
        }
        if (a.starts_with('-') || a.starts_with('+')) && a.len() > 1 {
            if a[1..].contains('c') {
                has_c = true;
            }
            i += 1;
            continue;
        }
        break;
    }
    match (has_c, args.get(i)) {
        (true, Some(script)) => Unwrapped::Script(script.clone()),
        _ => Unwrapped::Run,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(src: &str) -> Vec<String> {
        analyze(src)
            .segments
            .iter()
            .map(|s| s.inner_text())
            .collect()
    }

    #[test]
    fn wrappers_and_scripts_unwrap() {
        assert_eq!(names("FOO=1 BAR=2 rm x"), vec!["rm x"]);
        assert_eq!(
            names("env -i A=b timeout -s KILL 10 nice -n 5 rm x"),
            vec!["rm x"]
        );
        assert_eq!(
            names("bash -lc 'cd a && rm -rf b'"),
            vec!["", "cd a", "rm -rf b"]
        );
        assert_eq!(names("sh -c \"sudo ls\""), vec!["", "sudo ls"]);
        assert_eq!(names("eval 'shutdown now'"), vec!["", "shutdown now"]);
        assert_eq!(
            names("find . -name x -exec rm {} ;"),
            vec!["find . -name x", "rm {}"]
        );
        assert_eq!(names("ls | xargs -0 rm"), vec!["ls", "rm"]);
        assert_eq!(names("ls | xargs"), vec!["ls", "echo"]);
        assert_eq!(names("command -v sudo"), vec!["command -v sudo"]);
        assert_eq!(names("if true; then rm x; fi"), vec!["true", "rm x"]);
        assert_eq!(names("for f in a b; do rm $f; done"), vec!["rm $f"]);
    }

    #[test]
    fn endless_exec_chains_are_refused_not_followed() {
        let analysis = analyze(&"find -exec ".repeat(10_000));
        assert_eq!(
            analysis.problem.as_deref(),
            Some("commands are nested too deeply")
        );
        assert!(analysis.segments.len() <= shell::MAX_DEPTH + 2);
    }
}
