//! Commands that only read, which read-only mode lets run: a list of
//! programs, plus `sort`, `uniq`, `sed`, `find` and `git` without the flags
//! or subcommands that write.

use super::path_words::is_harmless_device;
use super::segment::{Segment, operands};

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
        if matches!(a, "-C" | "--work-tree") {
            i += 2;
        } else if a == "-c"
            || a.starts_with("--config-env")
            || a.starts_with("--exec-path")
            || a.starts_with("--git-dir")
            || a == "-p"
            || a == "--paginate"
        {
            // Config, helpers and a pager of the command's choosing.
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
        | "show-ref" | "whatchanged" | "help" | "version" => !rest.iter().any(|a| {
            a.starts_with("--output")
                // `git grep -O CMD` opens the matches in a program.
                || a.starts_with("-O")
                || a.starts_with("--open-files-in-pager")
                // Helpers that run a program of the command's choosing.
                || a.starts_with("--ext-diff")
                || a.starts_with("--textconv")
                || a.starts_with("--exec")
                || (a.starts_with('-') && !a.starts_with("--") && a.contains('O') && sub == "grep")
        }),
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
