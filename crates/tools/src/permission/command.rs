//! What a shell command line will run: parsed commands with leading
//! assignments, wrappers (`env`, `timeout`, `nohup`, `xargs`, ...) and nested
//! scripts (`bash -c`, `eval`, `find -exec`) unwrapped, then classified as
//! never-allowed, destructive or read-only.

use super::shell::{self, Parsed, Redirect, SimpleCommand};

/// One command that will run, after unwrapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    /// The command as written (assignments dropped), for allow rules.
    pub text: String,
    /// The command that actually runs, wrappers removed.
    pub argv: Vec<String>,
    /// Redirections of the command as written.
    pub redirects: Vec<Redirect>,
    /// Fed by a pipe.
    pub piped_in: bool,
}

impl Segment {
    /// The unwrapped command as one line, for allow rules.
    pub fn inner_text(&self) -> String {
        self.argv.join(" ")
    }

    /// The program name: the basename of argv[0], without a leading `\`.
    pub fn name(&self) -> &str {
        program_name(self.argv.first().map_or("", String::as_str))
    }
}

/// A command line split into what will run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Analysis {
    pub segments: Vec<Segment>,
    /// Why parsing was incomplete, if it was.
    pub problem: Option<String>,
    /// True when some script level contains a fork bomb written as code.
    pub fork_bomb: bool,
}

fn program_name(word: &str) -> &str {
    let word = word.trim_start_matches('\\');
    word.rsplit('/').next().unwrap_or(word)
}

const SHELLS: &[&str] = &[
    "bash", "sh", "zsh", "dash", "ksh", "mksh", "ash", "fish", "busybox",
];

/// Splits and unwraps a command line.
pub(crate) fn analyze(src: &str) -> Analysis {
    let parsed = shell::parse(src);
    let mut out = Analysis {
        segments: Vec::new(),
        problem: parsed.problem.clone(),
        fork_bomb: false,
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

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            let mut chars = name.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
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

// ---------------------------------------------------------------------------
// Classification

/// True for `-r`, `-R`, `-rf`, `-fr`, `--recursive` and friends.
fn has_recursive_flag(args: &[String]) -> bool {
    args.iter().take_while(|a| *a != "--").any(|a| {
        a == "--recursive" || (a.starts_with('-') && !a.starts_with("--") && a.contains(['r', 'R']))
    })
}

/// The non-option arguments (everything after `--` counts).
fn operands(args: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut after_dashdash = false;
    for a in args {
        if !after_dashdash && a == "--" {
            after_dashdash = true;
        } else if after_dashdash || !a.starts_with('-') || a == "-" {
            out.push(a.as_str());
        }
    }
    out
}

/// True when deleting or re-permissioning `target` recursively would wreck
/// the system or the user's home: `/`, `/*`, a top-level folder like `/usr`,
/// `~`, `$HOME`.
fn is_root_like(target: &str) -> bool {
    let home = std::env::var("HOME").ok().filter(|h| h.len() > 1);
    let mut t = target.to_owned();
    for prefix in ["${HOME}", "$HOME", "~"] {
        if let Some(rest) = t.strip_prefix(prefix)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            // Home itself, or everything in it.
            let rest = rest.trim_matches('/');
            return rest.is_empty() || rest == "*" || rest == ".";
        }
    }
    if let Some(h) = &home
        && let Some(rest) = t.strip_prefix(h.as_str())
        && matches!(rest.trim_matches('/'), "" | "*" | ".")
    {
        return true;
    }
    if !t.starts_with('/') {
        return false;
    }
    while t.contains("//") {
        t = t.replace("//", "/");
    }
    let parts: Vec<&str> = t
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.contains(&"..") {
        return true;
    }
    parts.len() <= 1
}

const BLOCK_DEVICES: &[&str] = &[
    "/dev/sd",
    "/dev/hd",
    "/dev/vd",
    "/dev/xvd",
    "/dev/nvme",
    "/dev/mmcblk",
    "/dev/disk",
    "/dev/md",
    "/dev/dm-",
    "/dev/mapper/",
];

/// Why a command must never run, if it must not.
pub(crate) fn deny_reason(seg: &Segment) -> Option<String> {
    for r in &seg.redirects {
        if r.writes_file() && BLOCK_DEVICES.iter().any(|d| r.target.starts_with(d)) {
            return Some(format!("writes straight to the disk device {}", r.target));
        }
    }
    let name = seg.name();
    let args = seg.argv.get(1..).unwrap_or_default();
    let has = |x: &str| args.iter().any(|a| a == x);
    match name {
        "sudo" | "su" | "doas" | "pkexec" | "run0" => {
            Some(format!("`{name}` runs commands as another user"))
        }
        n if n.starts_with("mkfs") => Some(format!("`{n}` formats a disk")),
        "mke2fs" | "mkswap" | "wipefs" | "fdisk" | "sfdisk" | "cfdisk" | "parted" | "sgdisk" => {
            Some(format!("`{name}` formats or repartitions a disk"))
        }
        "dd" if args.iter().any(|a| a.starts_with("if=")) => {
            Some("`dd if=...` copies raw data and can overwrite disks".to_owned())
        }
        "shutdown" | "reboot" | "halt" | "poweroff" => Some(format!("`{name}` stops the machine")),
        "init" | "telinit" if has("0") || has("6") => Some(format!("`{name}` stops the machine")),
        "systemctl"
            if [
                "poweroff",
                "reboot",
                "halt",
                "kexec",
                "suspend",
                "hibernate",
            ]
            .iter()
            .any(|c| has(c)) =>
        {
            Some("`systemctl` would stop the machine".to_owned())
        }
        "rm" if has("--no-preserve-root") => {
            Some("`rm --no-preserve-root` deletes the whole system".to_owned())
        }
        "rm" if has_recursive_flag(args) => operands(args)
            .into_iter()
            .find(|t| is_root_like(t))
            .map(|t| format!("`rm -r {t}` deletes the system or the home folder")),
        "chmod" | "chown" | "chgrp" if has_recursive_flag(args) => operands(args)
            .into_iter()
            .skip(1)
            .find(|t| is_root_like(t))
            .map(|t| format!("`{name} -R` on {t} changes the whole system or home folder")),
        "kill" => {
            let targets = kill_targets(args);
            targets
                .contains(&"-1")
                .then(|| "`kill -1` signals every process you own".to_owned())
        }
        _ => None,
    }
}

fn kill_targets(args: &[String]) -> Vec<&str> {
    let mut i = 0;
    if let Some(first) = args.first() {
        if first == "-s" || first == "-n" {
            i = 2;
        } else if first.starts_with('-') && first != "--" && args.len() > 1 {
            i = 1;
        }
    }
    args.get(i..)
        .unwrap_or_default()
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--")
        .collect()
}

/// A `name() { name | name & }; name` fork bomb anywhere in the text.
fn is_fork_bomb(src: &str) -> bool {
    let compact: String = src.chars().filter(|c| !c.is_whitespace()).collect();
    let mut search = 0;
    while let Some(pos) = compact[search..].find("(){") {
        let at = search + pos;
        let name_start = compact[..at]
            .char_indices()
            .rev()
            .find(|&(_, c)| !(c.is_alphanumeric() || matches!(c, '_' | ':' | '.' | '-')))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let name = &compact[name_start..at];
        if !name.is_empty() {
            let body = &compact[at + 3..];
            let body = &body[..body.find('}').unwrap_or(body.len())];
            if body.contains(&format!("{name}|{name}")) {
                return true;
            }
        }
        search = at + 3;
    }
    false
}

/// Why a command deserves a question before it runs, if it does.
pub(crate) fn destructive_reason(seg: &Segment) -> Option<String> {
    let name = seg.name();
    let args = seg.argv.get(1..).unwrap_or_default();
    let has = |x: &str| args.iter().any(|a| a == x);
    match name {
        "rm" | "rmdir" | "unlink" | "shred" | "truncate" => {
            Some(format!("`{}` deletes or destroys files", seg.inner_text()))
        }
        "chmod" | "chown" | "chgrp" if has_recursive_flag(args) => Some(format!(
            "`{}` changes permissions recursively",
            seg.inner_text()
        )),
        "kill" | "pkill" | "killall" => Some(format!("`{}` stops processes", seg.inner_text())),
        "dd" => Some(format!("`{}` writes raw data", seg.inner_text())),
        "git" => git_destructive(args).map(|why| format!("`{}` {why}", seg.inner_text())),
        "find" if has("-delete") => Some(format!("`{}` deletes files", seg.inner_text())),
        "docker" | "podman" => {
            let sub: Vec<&str> = operands(args).into_iter().take(2).collect();
            let risky = matches!(sub.first(), Some(&("rm" | "rmi")))
                || sub.get(1).is_some_and(|s| matches!(*s, "prune" | "rm"));
            risky.then(|| format!("`{}` deletes containers or data", seg.inner_text()))
        }
        "cargo" | "npm" | "yarn" | "pnpm" | "twine" | "gem" => {
            let sub = operands(args).first().copied();
            matches!(
                sub,
                Some("publish" | "yank" | "unpublish" | "push" | "upload")
            )
            .then(|| format!("`{}` publishes a package", seg.inner_text()))
        }
        n if SHELLS.contains(&n) && seg.piped_in && operands(args).is_empty() => {
            Some(format!("pipes data into `{n}` to run it as a script"))
        }
        _ => None,
    }
}

fn git_destructive(args: &[String]) -> Option<&'static str> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if matches!(a, "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace") {
            i += 2;
        } else if a.starts_with('-') {
            i += 1;
        } else {
            break;
        }
    }
    let sub = args.get(i)?.as_str();
    let rest = &args[i + 1..];
    let has = |x: &str| rest.iter().any(|a| a == x);
    let short = |c: char| {
        rest.iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains(c))
    };
    match sub {
        "push"
            if short('f')
                || short('d')
                || rest.iter().any(|a| {
                    a.starts_with("--force") || a == "--delete" || a == "--mirror" || a == "--prune"
                })
                || rest
                    .iter()
                    .skip(1)
                    .any(|a| a.starts_with('+') || a.starts_with(':')) =>
        {
            Some("rewrites or deletes remote history")
        }
        "reset" if has("--hard") || has("--merge") || has("--keep") => {
            Some("discards uncommitted work")
        }
        "clean" => Some("deletes untracked files"),
        "checkout" if has("--") || has(".") || short('f') || has("--force") => {
            Some("discards uncommitted changes")
        }
        "restore" if !has("--staged") || has("--worktree") => Some("discards uncommitted changes"),
        "branch" if short('D') || (has("--delete") && has("--force")) => {
            Some("deletes a branch that may not be merged")
        }
        "stash" if has("drop") || has("clear") => Some("deletes stashed work"),
        "tag" if short('d') || has("--delete") => Some("deletes a tag"),
        "filter-branch" | "filter-repo" => Some("rewrites history"),
        "reflog" if has("expire") || has("delete") => Some("deletes recovery points"),
        "gc" if rest.iter().any(|a| a.starts_with("--prune")) => Some("deletes recovery points"),
        "update-ref" if has("-d") => Some("deletes a ref"),
        "rebase" if has("--root") => Some("rewrites all history"),
        _ => None,
    }
}

/// Programs that only read (given no output redirection and no risky flags).
const READ_ONLY_PROGRAMS: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "pwd",
    "echo",
    "printf",
    "which",
    "whereis",
    "type",
    "file",
    "stat",
    "du",
    "df",
    "tree",
    "diff",
    "cmp",
    "cut",
    "tr",
    "nl",
    "od",
    "xxd",
    "hexdump",
    "strings",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "md5sum",
    "cksum",
    "b2sum",
    "date",
    "uname",
    "whoami",
    "id",
    "hostname",
    "true",
    "false",
    "test",
    "[",
    "printenv",
    "jq",
    "column",
    "fold",
    "expand",
    "unexpand",
    "comm",
    "join",
    "paste",
    "rev",
    "tac",
    "seq",
    "cd",
    "sleep",
    "uptime",
    "nproc",
    "free",
    "ps",
    "env",
    "less",
    "more",
    "look",
    "locale",
    "getconf",
    "lsof",
    "tokei",
    "cloc",
    "fd",
    "bat",
];

/// True when the segment only reads.
pub(crate) fn is_read_only(seg: &Segment) -> bool {
    let writes = seg
        .redirects
        .iter()
        .any(|r| r.writes_file() && !is_harmless_device(&r.target));
    if writes {
        return false;
    }
    let name = seg.name();
    let args = seg.argv.get(1..).unwrap_or_default();
    let flag = |pred: &dyn Fn(&str) -> bool| args.iter().any(|a| pred(a));
    match name {
        "" => true,
        "sort" => !flag(&|a| a == "-o" || a.starts_with("--output")),
        "uniq" => operands(args).len() <= 1,
        "sed" => !flag(&|a| {
            a.starts_with("-i")
                || a.starts_with("--in-place")
                || (a.starts_with('-') && !a.starts_with("--") && a.contains('i'))
        }),
        "find" => !flag(&|a| {
            matches!(
                a,
                "-delete"
                    | "-exec"
                    | "-execdir"
                    | "-ok"
                    | "-okdir"
                    | "-fprint"
                    | "-fprint0"
                    | "-fprintf"
                    | "-fls"
            )
        }),
        "git" => git_read_only(args),
        n => READ_ONLY_PROGRAMS.contains(&n),
    }
}

fn git_read_only(args: &[String]) -> bool {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if matches!(a, "-C" | "--git-dir" | "--work-tree") {
            i += 2;
        } else if a == "-c" {
            return false;
        } else if a.starts_with('-') {
            i += 1;
        } else {
            break;
        }
    }
    let Some(sub) = args.get(i) else {
        return true;
    };
    let rest = &args[i + 1..];
    let only_flags = |allowed: &[&str]| rest.iter().all(|a| allowed.contains(&a.as_str()));
    match sub.as_str() {
        "status" | "log" | "diff" | "show" | "blame" | "ls-files" | "ls-tree" | "rev-parse"
        | "describe" | "shortlog" | "grep" | "cat-file" | "rev-list" | "merge-base"
        | "show-ref" | "whatchanged" | "help" | "version" => {
            !rest.iter().any(|a| a.starts_with("--output"))
        }
        "branch" => only_flags(&[
            "-a",
            "-r",
            "-v",
            "-vv",
            "--list",
            "--all",
            "--show-current",
            "--remotes",
        ]),
        "tag" => only_flags(&["-l", "--list"]),
        "remote" => {
            only_flags(&["-v", "--verbose"])
                || rest.first().is_some_and(|a| a == "get-url" || a == "show")
        }
        "config" => rest.iter().any(|a| {
            matches!(
                a.as_str(),
                "--get" | "--get-all" | "--list" | "-l" | "--get-regexp"
            )
        }),
        "stash" => rest.first().is_some_and(|a| a == "list" || a == "show"),
        "reflog" => rest.is_empty() || rest.first().is_some_and(|a| a == "show"),
        _ => false,
    }
}

/// Devices any command may touch without it counting as a write or as
/// leaving the workspace.
pub(crate) fn is_harmless_device(path: &str) -> bool {
    matches!(
        path,
        "/dev/null"
            | "/dev/stdin"
            | "/dev/stdout"
            | "/dev/stderr"
            | "/dev/tty"
            | "/dev/zero"
            | "/dev/random"
            | "/dev/urandom"
    ) || path.starts_with("/dev/fd/")
}

/// Words in a segment that name paths: arguments that start with `/`, `~`
/// or `$HOME`, contain a `..` component, go through a symlink in the
/// workspace, or are `--opt=` / `key=` values like those; plus redirection
/// targets. An absolute path counts only if its first component exists, so
/// `/api/v1` in a grep pattern is not a path.
pub(crate) fn path_words(seg: &Segment, workspace: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut consider = |w: &str| {
        let candidates = std::iter::once(w).chain(w.split_once('=').map(|(_, v)| v));
        for c in candidates {
            if looks_like_path(c) || through_symlink(c, workspace) {
                out.push(c.to_owned());
                break;
            }
        }
    };
    for a in seg.argv.iter().skip(1) {
        consider(a);
    }
    for r in &seg.redirects {
        if (r.writes_file() || r.reads_file()) && !r.target.is_empty() {
            consider(&r.target);
        }
    }
    out
}

/// True when a relative word names an existing path in the workspace that
/// goes through a symlink (which may lead outside it).
fn through_symlink(w: &str, workspace: &std::path::Path) -> bool {
    use std::path::Component;
    if w.is_empty() || w.starts_with(['-', '/']) {
        return false;
    }
    let mut p = workspace.to_path_buf();
    for component in std::path::Path::new(w).components() {
        match component {
            Component::CurDir => continue,
            Component::Normal(c) => p.push(c),
            _ => return false,
        }
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

fn looks_like_path(w: &str) -> bool {
    if w.is_empty() || is_harmless_device(w) {
        return false;
    }
    if w == "~" || w.starts_with("~/") || w.starts_with("$HOME") || w.starts_with("${HOME}") {
        return true;
    }
    if w == ".." || w.starts_with("../") || w.contains("/../") || w.ends_with("/..") {
        return true;
    }
    if let Some(rest) = w.strip_prefix('/') {
        let first = rest.split('/').next().unwrap_or("");
        if first.is_empty() {
            return true;
        }
        if first.contains(['*', '?', '[']) {
            return true;
        }
        return std::path::Path::new("/").join(first).exists();
    }
    false
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
    fn root_like_targets() {
        for t in [
            "/",
            "/*",
            "//",
            "/.",
            "/usr",
            "/etc/",
            "~",
            "~/",
            "$HOME",
            "${HOME}/*",
            "/usr/../",
        ] {
            assert!(is_root_like(t), "{t}");
        }
        for t in ["./build", "build", "/tmp/x/y", "~/project/target", "*", "."] {
            assert!(!is_root_like(t), "{t}");
        }
    }

    #[test]
    fn fork_bombs() {
        assert!(is_fork_bomb(":(){ :|:& };:"));
        assert!(is_fork_bomb("bomb() { bomb | bomb & }; bomb"));
        assert!(!is_fork_bomb("f() { echo hi; }; f"));
        assert!(!is_fork_bomb("echo '()'"));
        // Names after multi-byte characters.
        assert!(!is_fork_bomb("echo →f(){ :; }"));
        assert!(!is_fork_bomb("ls # see §x(){"));
        assert!(is_fork_bomb("→b(){ b|b& };b"));
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
