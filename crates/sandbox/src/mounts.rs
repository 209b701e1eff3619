//! The confined command's file system: a fresh root that holds only what
//! the policy names, bind-mounted from the real one, plus a minimal `/dev`
//! and a `/proc` of the command's own PID namespace.
//!
//! Built like bubblewrap does it: an empty tmpfs becomes the root with the
//! old root kept at `/oldroot`, paths are bound from there into `/newroot`,
//! and a last `pivot_root` makes `/newroot` the root and drops the old one.
//! A path that is not bound does not exist inside, so no secret, socket or
//! hard link target outside the policy can even be named.

use crate::policy::Policy;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::statvfs::{FsFlags, statvfs};
use nix::unistd::{chdir, pivot_root};
use std::path::{Path, PathBuf};

/// A step that failed, with the path it was about.
#[derive(Debug, thiserror::Error)]
#[error("{what} {path}: {source}")]
pub struct MountError {
    what: &'static str,
    path: PathBuf,
    source: std::io::Error,
}

fn fail<'a, E: Into<std::io::Error>>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(E) -> MountError + 'a {
    move |e| MountError {
        what,
        path: path.to_path_buf(),
        source: e.into(),
    }
}

/// Where the old root is seen while the new one is built.
const OLD: &str = "/oldroot";
/// Where the new root is built.
const NEW: &str = "/newroot";

/// Device files a command may use; all but the random ones are writable.
/// No `tty`: a command has no terminal to type into.
pub const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom"];

/// Parts of `/proc` that change the kernel; read-only even though Landlock
/// already refuses writes there.
const PROC_READ_ONLY: &[&str] = &["sys", "sysrq-trigger", "irq", "bus"];

/// One thing to put in the new root.
#[derive(Debug, PartialEq, Eq)]
enum Entry {
    /// Bind `from` (a path outside) at `at`.
    Bind {
        from: PathBuf,
        at: PathBuf,
        writable: bool,
    },
    /// A folder seen through an overlay whose upper layer is the private
    /// folder `layer`: reads see the folder outside, writes stay private.
    Overlay { at: PathBuf, layer: PathBuf },
    /// Make an already bound path read-only.
    ReadOnly(PathBuf),
    /// Cover a path with an empty read-only folder or file.
    Hide(PathBuf),
    /// A symbolic link.
    Link(PathBuf, PathBuf),
}

impl Entry {
    fn at(&self) -> &Path {
        match self {
            Entry::Bind { at, .. }
            | Entry::Overlay { at, .. }
            | Entry::ReadOnly(at)
            | Entry::Hide(at)
            | Entry::Link(at, _) => at,
        }
    }

    /// Binds come before what is done inside them at the same depth.
    fn rank(&self) -> u8 {
        match self {
            Entry::Link(..) | Entry::Bind { .. } | Entry::Overlay { .. } => 0,
            Entry::ReadOnly(_) => 1,
            Entry::Hide(_) => 2,
        }
    }
}

/// The entries of `policy`, parents before what lies inside them.
fn entries(policy: &Policy) -> Vec<Entry> {
    let mut out = Vec::new();
    for r in &policy.read {
        out.push(Entry::Bind {
            from: r.clone(),
            at: r.clone(),
            writable: false,
        });
    }
    for w in &policy.write {
        out.push(Entry::Bind {
            from: w.clone(),
            at: w.clone(),
            writable: true,
        });
    }
    if let Some(t) = &policy.tmp {
        out.push(Entry::Bind {
            from: t.clone(),
            at: PathBuf::from("/tmp"),
            writable: true,
        });
        out.push(Entry::Bind {
            from: t.clone(),
            at: t.clone(),
            writable: true,
        });
    }
    // A second bind of the same path: a mount point cannot be renamed,
    // removed or replaced.
    for pin in &policy.pinned {
        out.push(Entry::Bind {
            from: pin.clone(),
            at: pin.clone(),
            writable: true,
        });
    }
    for (i, cache) in policy.copy_on_write.iter().enumerate() {
        match &policy.layers {
            Some(layers) => out.push(Entry::Overlay {
                at: cache.clone(),
                layer: layers.join(i.to_string()),
            }),
            None => out.push(Entry::Bind {
                from: cache.clone(),
                at: cache.clone(),
                writable: false,
            }),
        }
    }
    out.extend(policy.read_only.iter().cloned().map(Entry::ReadOnly));
    out.extend(policy.hidden.iter().cloned().map(Entry::Hide));
    out.extend(
        policy
            .links
            .iter()
            .map(|(l, t)| Entry::Link(l.clone(), t.clone())),
    );
    out.sort_by(|a, b| {
        let depth = |e: &Entry| e.at().components().count();
        depth(a)
            .cmp(&depth(b))
            .then(a.rank().cmp(&b.rank()))
            .then(a.at().cmp(b.at()))
    });
    out
}

/// `path` (absolute) placed under `base`.
fn under(base: &str, path: &Path) -> PathBuf {
    Path::new(base).join(path.strip_prefix("/").unwrap_or(path))
}

/// Builds the new root and enters it; the working folder is `cwd` again
/// afterwards. Must run in a fresh mount namespace, as the first process of
/// a fresh PID namespace (for `/proc`).
pub fn enter_new_root(policy: &Policy, cwd: &Path) -> Result<(), MountError> {
    let none: Option<&str> = None;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(fail("cannot make mounts private at", Path::new("/")))?;
    // A tmpfs on /tmp becomes the root; the old root is kept at /oldroot.
    let base = Path::new("/tmp");
    mount(
        Some("tmpfs"),
        base,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755"),
    )
    .map_err(fail("cannot mount a tmpfs on", base))?;
    for dir in ["oldroot", "newroot"] {
        std::fs::create_dir(base.join(dir)).map_err(fail("cannot create", &base.join(dir)))?;
    }
    pivot_root(base, &base.join("oldroot")).map_err(fail("cannot pivot to", base))?;
    chdir("/").map_err(fail("cannot enter", Path::new("/")))?;
    mount(
        Some("tmpfs"),
        NEW,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755"),
    )
    .map_err(fail("cannot mount a tmpfs on", Path::new(NEW)))?;

    for entry in entries(policy) {
        place(&entry)?;
    }
    make_dev()?;
    make_proc()?;
    // The skeleton itself (the folders made to hold mount points) is read-only.
    remount(Path::new(NEW), false, false)?;

    umount2(OLD, MntFlags::MNT_DETACH).map_err(fail("cannot detach", Path::new(OLD)))?;
    chdir(NEW).map_err(fail("cannot enter", Path::new(NEW)))?;
    pivot_root(".", ".").map_err(fail("cannot pivot to", Path::new(NEW)))?;
    umount2(".", MntFlags::MNT_DETACH)
        .map_err(fail("cannot detach the old root at", Path::new("/")))?;
    chdir(cwd).map_err(fail("cannot enter the working folder", cwd))?;
    Ok(())
}

fn place(entry: &Entry) -> Result<(), MountError> {
    match entry {
        Entry::Bind { from, at, writable } => {
            let from = under(OLD, from);
            let at = under(NEW, at);
            let is_dir = from.is_dir();
            make_mount_point(&at, is_dir)?;
            bind(&from, &at)?;
            remount(&at, *writable, true)
        }
        Entry::Overlay { at, layer } => {
            let lower = under(OLD, at);
            let new_at = under(NEW, at);
            make_mount_point(&new_at, true)?;
            if mount_overlay(&lower, &under(OLD, layer), &new_at).is_err() {
                // No overlay here: the cache can be read, not changed.
                bind(&lower, &new_at)?;
                return remount(&new_at, false, true);
            }
            Ok(())
        }
        Entry::ReadOnly(path) => {
            let at = under(NEW, path);
            bind(&at, &at)?;
            remount(&at, false, true)
        }
        Entry::Hide(path) => {
            let at = under(NEW, path);
            if at.is_dir() {
                mount(
                    Some("tmpfs"),
                    &at,
                    Some("tmpfs"),
                    MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                    Some("size=4k,mode=0755"),
                )
                .map_err(fail("cannot hide", path))?;
                remount(&at, false, false)
            } else {
                bind(&under(OLD, Path::new("/dev/null")), &at)?;
                remount(&at, false, true)
            }
        }
        Entry::Link(link, target) => {
            let at = under(NEW, link);
            if let Some(parent) = at.parent() {
                std::fs::create_dir_all(parent).map_err(fail("cannot create", parent))?;
            }
            std::os::unix::fs::symlink(target, &at).map_err(fail("cannot link", link))
        }
    }
}

/// Mounts an overlay of `lower` at `at` whose upper layer and work folder
/// live in `layer` (made if missing). Refused for paths holding the
/// characters that separate overlay options.
fn mount_overlay(lower: &Path, layer: &Path, at: &Path) -> Result<(), MountError> {
    let upper = layer.join("upper");
    let work = layer.join("work");
    for dir in [&upper, &work] {
        std::fs::create_dir_all(dir).map_err(fail("cannot create", dir))?;
    }
    let mut options = String::new();
    for (key, path) in [
        ("lowerdir", lower),
        ("upperdir", &upper),
        ("workdir", &work),
    ] {
        let text = path.to_str().filter(|t| !t.contains([',', ':', '\\']));
        let Some(text) = text else {
            return Err(MountError {
                what: "cannot use in an overlay",
                path: path.to_path_buf(),
                source: std::io::ErrorKind::InvalidInput.into(),
            });
        };
        options.push_str(&format!("{key}={text},"));
    }
    options.push_str("userxattr");
    mount(
        Some("overlay"),
        at,
        Some("overlay"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options.as_str()),
    )
    .map_err(fail("cannot mount an overlay on", at))
}

/// Creates an empty folder or file to mount on, with its parents.
fn make_mount_point(at: &Path, dir: bool) -> Result<(), MountError> {
    if dir {
        return std::fs::create_dir_all(at).map_err(fail("cannot create", at));
    }
    if let Some(parent) = at.parent() {
        std::fs::create_dir_all(parent).map_err(fail("cannot create", parent))?;
    }
    if !at.exists() {
        std::fs::File::create(at).map_err(fail("cannot create", at))?;
    }
    Ok(())
}

fn bind(from: &Path, at: &Path) -> Result<(), MountError> {
    let none: Option<&str> = None;
    mount(
        Some(from),
        at,
        none,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        none,
    )
    .map_err(fail("cannot bind", from))
}

/// Remounts `at` (a bind mount when `bind`) with nosuid and nodev, and
/// read-only unless `writable`; flags the kernel locked on the source in a
/// user namespace (noexec, atime) are kept, or the remount is refused.
fn remount(at: &Path, writable: bool, bind: bool) -> Result<(), MountError> {
    let current = statvfs(at).map_err(fail("cannot inspect", at))?.flags();
    let mut flags = MsFlags::MS_REMOUNT | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if bind {
        flags |= MsFlags::MS_BIND;
    }
    if !writable {
        flags |= MsFlags::MS_RDONLY;
    }
    for (have, keep) in [
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if current.contains(have) {
            flags |= keep;
        }
    }
    let none: Option<&str> = None;
    mount(none, at, none, flags, none).map_err(fail("cannot remount", at))
}

/// A `/dev` with the harmless device files, the usual links and a private
/// `/dev/shm`.
fn make_dev() -> Result<(), MountError> {
    let dev = under(NEW, Path::new("/dev"));
    std::fs::create_dir_all(&dev).map_err(fail("cannot create", &dev))?;
    mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("mode=0755"),
    )
    .map_err(fail("cannot mount a tmpfs on", &dev))?;
    for name in DEVICES {
        let from = under(OLD, &Path::new("/dev").join(name));
        if !from.exists() {
            continue;
        }
        let at = dev.join(name);
        make_mount_point(&at, false)?;
        bind(&from, &at)?;
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(name)).map_err(fail("cannot link", &dev))?;
    }
    let shm = dev.join("shm");
    std::fs::create_dir(&shm).map_err(fail("cannot create", &shm))?;
    mount(
        Some("tmpfs"),
        &shm,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("mode=1777"),
    )
    .map_err(fail("cannot mount a tmpfs on", &shm))?;
    remount(&dev, false, false)
}

/// A `/proc` of the command's own PID namespace: whittle and every other
/// process of the machine are not in it.
fn make_proc() -> Result<(), MountError> {
    let proc = under(NEW, Path::new("/proc"));
    std::fs::create_dir_all(&proc).map_err(fail("cannot create", &proc))?;
    mount(
        Some("proc"),
        &proc,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(fail("cannot mount /proc on", &proc))?;
    for name in PROC_READ_ONLY {
        let at = proc.join(name);
        if at.exists() {
            bind(&at, &at)?;
            remount(&at, false, true)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_are_mounted_before_what_lies_inside_them() {
        let p = Policy {
            read: vec!["/usr".into(), "/home/u/.cargo".into()],
            write: vec!["/tmp/x/ws".into()],
            read_only: vec!["/tmp/x/ws/.git/hooks".into()],
            hidden: vec!["/tmp/x/ws/.ssh".into()],
            links: vec![("/bin".into(), "usr/bin".into())],
            tmp: Some("/tmp/whittle-1".into()),
            pinned: vec!["/tmp/x/ws/.git".into()],
            copy_on_write: vec!["/home/u/.cargo/registry".into()],
            layers: Some("/tmp/layers".into()),
            ..Policy::default()
        };
        let order: Vec<String> = entries(&p)
            .iter()
            .map(|e| e.at().display().to_string())
            .collect();
        let pos = |p: &str| order.iter().position(|o| o == p).unwrap();
        assert!(pos("/tmp") < pos("/tmp/x/ws"), "{order:?}");
        assert!(pos("/tmp") < pos("/tmp/whittle-1"));
        assert!(pos("/tmp/x/ws") < pos("/tmp/x/ws/.git"));
        assert!(pos("/tmp/x/ws/.git") < pos("/tmp/x/ws/.git/hooks"));
        assert!(pos("/tmp/x/ws") < pos("/tmp/x/ws/.ssh"));
        assert!(pos("/home/u/.cargo") < pos("/home/u/.cargo/registry"));
        assert_eq!(
            under(NEW, Path::new("/usr/bin")),
            Path::new("/newroot/usr/bin")
        );
    }
}
