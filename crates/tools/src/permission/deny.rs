//! Commands that never run, in any mode: running as another user, wiping
//! the system or home, formatting disks, writing to disk devices, stopping
//! the machine, signalling every process, fork bombs.

use super::segment::{Segment, has_recursive_flag, operands};

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
pub(super) fn is_fork_bomb(src: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
