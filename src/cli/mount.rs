//! `sdsfs mount` and `sdsfs unmount`.
//!
//! Daemonizing: `sdsfs mount` first opens the dataset in the calling process, so a dataset that
//! cannot be opened fails with one line and a nonzero status before anything is mounted. It then
//! re-executes itself in the foreground as a new session leader with stdio detached, and waits
//! on a pipe until that child reports the mount ready (or why it failed). Re-executing instead
//! of `fork`ing keeps the daemon free of a multi-threaded parent's state.
//!
//! In the foreground, SIGINT and SIGTERM are blocked in every thread and collected by the main
//! thread with `sigtimedwait`, which then unmounts cleanly; an external `umount` ends the session
//! thread, which the main thread also notices.
//!
//! As a mount(8) helper: invoked as `mount.fuse.sdsfs` or `mount.sdsfs` (a symlink to this
//! binary), or as `sdsfs SOURCE MOUNTPOINT -o OPTIONS` without the `mount` subcommand (what
//! `mount.fuse3` runs for `fuse.sdsfs` entries), the helper conventions apply: `-o` options,
//! `-t TYPE`, `-n`, `-s` and `-v` are accepted and ignored, and `-f` means "fake" (succeed
//! without mounting), not foreground. See [`helper_invocation`].
//!
//! Under systemd (`Type=notify`), a foreground mount sends `READY=1` to `$NOTIFY_SOCKET` once
//! the mount is in place and `STOPPING=1` when it starts unmounting ([`notify_systemd`]).

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use super::size::parse_size;
use crate::dataset::Dataset;
use crate::fs::cache::CacheConfig;
use crate::fs::catalog_watch::{watch, KnownRecords};
use crate::fs::fuse::{FileOpens, MountInfo, Ownership, SdsFuse};
use crate::fs::namespace::{Namespace, NamespaceConfig};
use crate::fs::stats::{CountingStore, MountStats};

/// Environment variable carrying the readiness pipe's file descriptor to the daemon.
const READY_FD_ENV: &str = "SDSFS_READY_FD";

/// sdsfs: mount a Signal Dataset (SDS) as a read-only tree of files.
#[derive(Debug, Parser)]
#[command(name = "sdsfs", version = crate::cli::VERSION, about, long_about = None)]
pub struct SdsfsCli {
    #[command(subcommand)]
    pub command: SdsfsCommand,
}

#[derive(Debug, Subcommand)]
pub enum SdsfsCommand {
    /// Mount DATASET read-only at MOUNTPOINT; returns once the mount is ready.
    Mount(MountArgs),
    /// Unmount a mounted dataset; a busy one (files open) is detached lazily, which also clears
    /// a mount whose daemon died with files open.
    Unmount {
        /// The mount point.
        mountpoint: PathBuf,
    },
    /// Report on a running mount: dataset, snapshot, uptime, cache size and hit rate, storage
    /// requests and bytes per backend, errors by object.
    ///
    /// Reads the hidden control file MOUNTPOINT/.sdsfs-status (JSON, taken when opened; not
    /// listed by ls, found by name).
    Status {
        /// The mount point.
        mountpoint: PathBuf,
        /// Print the raw JSON report.
        #[arg(long)]
        json: bool,
    },
    /// Write man pages (DIR/man/man1) and shell completions (DIR/completions) for sdsfs and sds.
    #[command(hide = true)]
    GenerateDocs {
        /// Output directory (created if missing).
        dir: PathBuf,
    },
}

#[derive(Debug, Clone, Args)]
pub struct MountArgs {
    /// The dataset: a local directory holding root.json, a file:// URL, or s3://bucket/prefix /
    /// gs://bucket/prefix (credentials and endpoint from the AWS_* / GOOGLE_* environment).
    pub dataset: String,
    /// An existing empty directory to mount on.
    pub mountpoint: PathBuf,
    /// Mount even if MOUNTPOINT is not empty or is already a mount point (its contents, or the
    /// mount there, are hidden until this mount goes).
    #[arg(long)]
    pub nonempty: bool,
    /// Stay attached to the terminal and log to stderr instead of daemonizing.
    #[arg(short = 'f', long)]
    pub foreground: bool,
    /// Where the daemon writes its log (default: nowhere). Foreground mounts log to stderr.
    #[arg(long, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
    /// Let users other than the mounting user access the mount.
    #[arg(long)]
    pub allow_other: bool,
    /// With --allow-other, follow references that leave the dataset's store (a local dataset
    /// naming s3:// or gs:// objects, another bucket), read with the daemon's credentials.
    #[arg(long)]
    pub cross_store_references: bool,
    /// Owner shown for every entry [default: the mounting user].
    #[arg(long)]
    pub uid: Option<u32>,
    /// Group shown for every entry [default: the mounting user's group].
    #[arg(long)]
    pub gid: Option<u32>,
    /// Memory for decoded records, e.g. 512M or 2G; larger records go to temporary files.
    #[arg(long, value_name = "BYTES", default_value = "1G", value_parser = parse_size)]
    pub cache_size: u64,
    /// Disk for the temporary files of records decoded outside memory, e.g. 4G; a record
    /// larger than this is refused (EIO).
    #[arg(long, value_name = "BYTES", default_value = "16G", value_parser = parse_size)]
    pub spill_size: u64,
    /// Seconds between re-reads of the annotation catalog (the one mutable object).
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub metadata_ttl: u64,
    /// Threads serving FUSE requests.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub threads: usize,
    /// Serve every read through the daemon and the mount's page cache. By default, when the
    /// kernel offers FUSE passthrough and the daemon runs as root, the `.raw`/`.sigmf-data`
    /// files of large fields (decoded into temporary files) are read by the kernel from those
    /// files directly.
    #[arg(long)]
    pub no_passthrough: bool,
    /// Who opens files: `kernel` (no request per open or close, every file's pages cached
    /// across opens, no passthrough), `daemon` (an OPEN and a RELEASE per file, passthrough
    /// possible), or `auto`: daemon opens only where passthrough is possible and the dataset's
    /// typical record is larger than a quarter of the cache.
    #[arg(long, value_name = "WHO", default_value = "auto")]
    pub file_opens: FileOpens,
    /// Comma-separated mount options as mount(8) passes them: ro, allow_other, uid=N, gid=N,
    /// cache_size=BYTES, spill_size=BYTES, metadata_ttl=SECS, log_file=PATH, threads=N,
    /// nopassthrough, nonempty,
    /// file_opens=auto|kernel|daemon,
    /// endpoint_url=URL, region=REGION, allow_http, no_absolute_references,
    /// cross_store_references; generic options
    /// (defaults, _netdev, nofail, noauto, user, nodev, nosuid, noexec, noatime, x-systemd.*, ...)
    /// are accepted and ignored; rw is refused.
    #[arg(short = 'o', value_name = "OPTIONS")]
    pub options: Vec<String>,
    #[command(flatten)]
    pub store: super::location::StoreArgs,
}

/// Entry point of the `sdsfs` binary.
pub fn sdsfs_main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let result = match helper_invocation(&argv) {
        Some(Ok(HelperCall::Mount(args))) => mount(*args),
        Some(Ok(HelperCall::Fake)) => Ok(()),
        Some(Err(message)) => Err(message),
        None => match SdsfsCli::parse_from(argv).command {
            SdsfsCommand::Mount(args) => mount(args),
            SdsfsCommand::Unmount { mountpoint } => unmount(&mountpoint),
            SdsfsCommand::Status { mountpoint, json } => super::status::status(&mountpoint, json),
            SdsfsCommand::GenerateDocs { dir } => super::docs::generate_docs(&dir),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sdsfs: {message}");
            ExitCode::FAILURE
        }
    }
}

/// What a mount(8)-style invocation asks for.
#[derive(Debug)]
pub enum HelperCall {
    /// Mount (daemonized unless `-o foreground`).
    Mount(Box<MountArgs>),
    /// `-f`: mount(8)'s "fake" mode, do everything but mount.
    Fake,
}

/// The subcommands of the `sdsfs` binary, which the helper form must not shadow.
const SUBCOMMANDS: &[&str] = &["mount", "unmount", "status", "generate-docs", "help"];

/// Recognises the mount(8) helper forms: the program is named `mount.*` (`mount.fuse.sdsfs`,
/// `mount.sdsfs`), or its first argument is neither a subcommand nor a flag
/// (`sdsfs SOURCE MOUNTPOINT -o OPTIONS`, as `mount.fuse3` runs it). `None` for the ordinary
/// command line.
pub fn helper_invocation(argv: &[OsString]) -> Option<Result<HelperCall, String>> {
    let program = argv
        .first()
        .map(Path::new)
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let first = argv.get(1).map(|a| a.to_string_lossy().into_owned());
    let by_name = program.starts_with("mount.");
    let by_shape = match &first {
        Some(a) => !a.starts_with('-') && !SUBCOMMANDS.contains(&a.as_str()),
        None => false,
    };
    if !by_name && !by_shape {
        return None;
    }
    Some(parse_helper_arguments(argv.get(1..).unwrap_or_default()))
}

fn parse_helper_arguments(arguments: &[OsString]) -> Result<HelperCall, String> {
    let usage = "usage: mount.fuse.sdsfs DATASET MOUNTPOINT [-o OPTIONS] [-fnsv] [-t TYPE]";
    let mut positional: Vec<OsString> = Vec::new();
    let mut options = Vec::new();
    let mut fake = false;
    let mut rest = arguments.iter();
    while let Some(argument) = rest.next() {
        let text = argument.to_string_lossy();
        match text.as_ref() {
            "-o" => options.push(
                rest.next()
                    .ok_or_else(|| format!("-o needs a value; {usage}"))?
                    .to_string_lossy()
                    .into_owned(),
            ),
            "-t" => {
                rest.next()
                    .ok_or_else(|| format!("-t needs a value; {usage}"))?;
            }
            "-n" | "-s" | "-v" => {}
            "-f" => fake = true,
            "--" => positional.extend(rest.by_ref().cloned()),
            _ if text.starts_with("-o") && text.len() > 2 => options.push(text[2..].to_string()),
            _ if text.starts_with("-t") && text.len() > 2 => {}
            _ if text.starts_with('-') && text.len() > 1 => {
                return Err(format!("unsupported helper option {text}; {usage}"))
            }
            _ => positional.push(argument.clone()),
        }
    }
    let [dataset, mountpoint] = positional.as_slice() else {
        return Err(usage.to_string());
    };
    // Reuse clap for the defaults, so the helper and `sdsfs mount` cannot drift apart.
    let cli = SdsfsCli::try_parse_from([
        OsString::from("sdsfs"),
        "mount".into(),
        "--".into(),
        dataset.clone(),
        mountpoint.clone(),
    ])
    .map_err(|e| e.to_string())?;
    let SdsfsCommand::Mount(mut args) = cli.command else {
        return Err(usage.to_string());
    };
    args.options = options;
    // Options are checked even when faking, so `mount -f` catches a typo in fstab.
    apply_mount_options(&mut args.clone())?;
    Ok(if fake {
        HelperCall::Fake
    } else {
        HelperCall::Mount(Box::new(args))
    })
}

/// Applies `-o` options on top of the flags.
pub fn apply_mount_options(args: &mut MountArgs) -> Result<(), String> {
    let options: Vec<String> = args
        .options
        .iter()
        .flat_map(|o| o.split(','))
        .filter(|o| !o.is_empty())
        .map(str::to_string)
        .collect();
    for option in options {
        let (name, value) = match option.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (option.as_str(), None),
        };
        let missing = || format!("mount option {name} needs a value");
        match name {
            "ro" => {}
            "rw" => return Err("mount option rw: sdsfs mounts are read-only".into()),
            "allow_other" => args.allow_other = true,
            "uid" => args.uid = Some(parse_number(name, value.ok_or_else(missing)?)?),
            "gid" => args.gid = Some(parse_number(name, value.ok_or_else(missing)?)?),
            "cache_size" => args.cache_size = parse_size(value.ok_or_else(missing)?)?,
            "spill_size" => args.spill_size = parse_size(value.ok_or_else(missing)?)?,
            "metadata_ttl" => args.metadata_ttl = parse_number(name, value.ok_or_else(missing)?)?,
            "threads" => args.threads = parse_number(name, value.ok_or_else(missing)?)?,
            "log_file" => args.log_file = Some(PathBuf::from(value.ok_or_else(missing)?)),
            "foreground" => args.foreground = true,
            "nopassthrough" => args.no_passthrough = true,
            "nonempty" => args.nonempty = true,
            "file_opens" => {
                args.file_opens = value
                    .ok_or_else(missing)?
                    .parse()
                    .map_err(|e| format!("mount option {name}: {e}"))?
            }
            "endpoint_url" => args.store.endpoint_url = Some(value.ok_or_else(missing)?.into()),
            "region" => args.store.region = Some(value.ok_or_else(missing)?.into()),
            "allow_http" => args.store.allow_http = true,
            "no_absolute_references" => args.store.no_absolute_references = true,
            "cross_store_references" => args.cross_store_references = true,
            _ if is_generic_option(name) => {}
            _ => return Err(format!("unknown mount option {name:?}")),
        }
    }
    Ok(())
}

fn parse_number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("mount option {name}={value}: not a number"))
}

/// Options mount(8), fstab and systemd pass that mean nothing to a FUSE daemon.
fn is_generic_option(name: &str) -> bool {
    const GENERIC: &[&str] = &[
        "defaults",
        "auto",
        "noauto",
        "user",
        "nouser",
        "users",
        "owner",
        "group",
        "_netdev",
        "nofail",
        "dev",
        "nodev",
        "suid",
        "nosuid",
        "exec",
        "noexec",
        "atime",
        "noatime",
        "relatime",
        "strictatime",
        "diratime",
        "nodiratime",
        "async",
        "sync",
        "comment",
        "default_permissions",
        "fsname",
        "subtype",
        "loop",
    ];
    GENERIC.contains(&name) || name.starts_with("x-") || name.starts_with("comment")
}

/// Opens the dataset named on the command line (shared with `sds`).
pub fn open_dataset(argument: &str) -> Result<Dataset, String> {
    super::location::open_dataset(argument).map_err(|e| e.0)
}

fn mount(mut args: MountArgs) -> Result<(), String> {
    crate::fs::cache::bound_allocator();
    apply_mount_options(&mut args)?;
    args.store.same_store_only = args.allow_other && !args.cross_store_references;
    super::location::use_store_args(args.store.clone());
    check_mountpoint(&args.mountpoint, args.nonempty)?;
    // Opening here too makes a bad dataset fail before anything is mounted or forked.
    let stats = Arc::new(MountStats::default());
    let counted = stats.clone();
    let dataset = super::location::open_dataset_with(&args.dataset, move |store, backend| {
        Arc::new(CountingStore::new(store, backend, counted))
    })
    .map_err(|e| e.0)?;
    crate::fs::namespace::check_servable(&dataset)?;
    if args.foreground {
        run_foreground(args, dataset, stats)
    } else {
        drop(dataset);
        spawn_daemon(&args)
    }
}

/// Refuses a mount point that is not a directory, is a dead mount, or (unless `nonempty`)
/// holds files or is already a mount point: mounting there would hide what is there without a
/// word, and a second mount over the first is almost always a mistake (a unit started twice,
/// a script run again).
fn check_mountpoint(path: &Path, nonempty: bool) -> Result<(), String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOTCONN) => dead_mount(path),
        _ => format!("{shown}: {e}"),
    })?;
    if !meta.is_dir() {
        return Err(format!("{shown}: mount point is not a directory"));
    }
    if nonempty {
        return Ok(());
    }
    if let Some(what) = mounted_at(path) {
        let listing = std::fs::read_dir(path).and_then(|mut entries| entries.next().transpose());
        if matches!(listing, Err(e) if e.raw_os_error() == Some(libc::ENOTCONN)) {
            return Err(dead_mount(path));
        }
        return Err(format!(
            "{shown}: already a mount point ({what}); unmount it first, or pass --nonempty \
             (-o nonempty) to mount over it"
        ));
    }
    let mut entries = std::fs::read_dir(path).map_err(|e| format!("{shown}: {e}"))?;
    if entries.next().is_some() {
        return Err(format!(
            "{shown}: mount point is not empty; use an empty directory, or pass --nonempty \
             (-o nonempty) to hide its contents under the mount"
        ));
    }
    Ok(())
}

/// The refusal of a mount point holding a mount whose daemon is gone (`ENOTCONN`).
fn dead_mount(path: &Path) -> String {
    let shown = path.display();
    format!(
        "{shown}: a mount whose daemon is gone is still there; clear it with \
         `sdsfs unmount {shown}`"
    )
}

/// The filesystem type and source of the mount whose mount point is `path`, from
/// `/proc/self/mountinfo`; `None` when nothing is mounted there (or the table is unreadable).
fn mounted_at(path: &Path) -> Option<String> {
    let wanted = std::fs::canonicalize(path).ok()?;
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // Each line: id parent major:minor root MOUNTPOINT options [optional...] - TYPE SOURCE ...
    table.lines().rev().find_map(|line| {
        let mut fields = line.split(' ');
        let point = fields.nth(4)?;
        if Path::new(OsStr::from_bytes(&unescape_mountinfo(point))) != wanted {
            return None;
        }
        let mut tail = line.split(" - ").nth(1)?.split(' ');
        let fstype = tail.next()?;
        let source = tail.next().map(unescape_mountinfo).unwrap_or_default();
        Some(format!("{fstype} {}", String::from_utf8_lossy(&source)))
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`).
fn unescape_mountinfo(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        let octal = bytes
            .get(at + 1..at + 4)
            .filter(|digits| byte == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d)))
            .and_then(|digits| u8::from_str_radix(std::str::from_utf8(digits).ok()?, 8).ok());
        match octal {
            Some(decoded) => {
                out.push(decoded);
                at += 4;
            }
            None => {
                out.push(byte);
                at += 1;
            }
        }
    }
    out
}

/// Re-executes this program in the foreground as a detached daemon and waits for it to report.
fn spawn_daemon(args: &MountArgs) -> Result<(), String> {
    let (read_end, write_end) = pipe().map_err(|e| format!("pipe: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own executable: {e}"))?;
    let stderr = match &args.log_file {
        Some(path) => Stdio::from(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("{}: {e}", path.display()))?,
        ),
        None => Stdio::null(),
    };
    let mut command = Command::new(exe);
    command
        .args(daemon_arguments(args))
        .env(READY_FD_ENV, write_end.to_string())
        // The daemon is not the service's main process; only a foreground mount notifies.
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // async-signal-safe functions (setsid, fcntl) on a descriptor this process owns.
    unsafe {
        command.pre_exec(move || {
            libc::setsid();
            let flags = libc::fcntl(write_end, libc::F_GETFD);
            libc::fcntl(write_end, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            Ok(())
        });
    }
    let child = command
        .spawn()
        .map_err(|e| format!("cannot start the daemon: {e}"));
    // SAFETY: `write_end` is a descriptor from `pipe()` that nothing else owns in this process.
    drop(unsafe { OwnedFd::from_raw_fd(write_end) });
    let mut child = child?;
    // SAFETY: `read_end` is a descriptor from `pipe()` that nothing else owns.
    let mut reader = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(read_end) });
    let mut report = String::new();
    let _ = reader.read_to_string(&mut report);
    match report.trim_end() {
        "ready" => Ok(()),
        "" => {
            let status = child.wait().map_err(|e| e.to_string())?;
            Err(format!(
                "the daemon exited ({status}) before the mount was ready"
            ))
        }
        failure => Err(failure.trim_start_matches("error: ").to_string()),
    }
}

fn daemon_arguments(args: &MountArgs) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec!["mount".into(), "--foreground".into()];
    if args.allow_other {
        out.push("--allow-other".into());
    }
    if args.cross_store_references {
        out.push("--cross-store-references".into());
    }
    if args.no_passthrough {
        out.push("--no-passthrough".into());
    }
    if args.nonempty {
        out.push("--nonempty".into());
    }
    out.extend(["--file-opens".into(), args.file_opens.to_string().into()]);
    if let Some(uid) = args.uid {
        out.extend(["--uid".into(), uid.to_string().into()]);
    }
    if let Some(gid) = args.gid {
        out.extend(["--gid".into(), gid.to_string().into()]);
    }
    out.extend([
        "--cache-size".into(),
        args.cache_size.to_string().into(),
        "--spill-size".into(),
        args.spill_size.to_string().into(),
        "--metadata-ttl".into(),
        args.metadata_ttl.to_string().into(),
        "--threads".into(),
        args.threads.to_string().into(),
    ]);
    out.extend(args.store.to_arguments());
    out.push("--".into());
    out.push(args.dataset.clone().into());
    out.push(args.mountpoint.clone().into());
    out
}

fn pipe() -> std::io::Result<(i32, i32)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((fds[0], fds[1]))
}

/// Tells a waiting parent (if any) how the mount went.
fn report_to_parent(message: &str) {
    let Some(fd) = std::env::var(READY_FD_ENV)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return;
    };
    std::env::remove_var(READY_FD_ENV);
    // SAFETY: the parent passed this descriptor to us for exactly this one write.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let _ = writeln!(file, "{message}");
}

fn run_foreground(args: MountArgs, dataset: Dataset, stats: Arc<MountStats>) -> Result<(), String> {
    let signals = block_termination_signals();
    init_logging();
    let result = serve(&args, dataset, stats, &signals);
    if let Err(message) = &result {
        report_to_parent(&format!("error: {message}"));
    }
    result
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SDSFS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn serve(
    args: &MountArgs,
    dataset: Dataset,
    stats: Arc<MountStats>,
    signals: &libc::sigset_t,
) -> Result<(), String> {
    let cache = CacheConfig {
        spill_bytes: args.spill_size,
        ..CacheConfig::for_cache_size(args.cache_size)
    };
    let memory = crate::budget::Budget::new("memory", cache.memory_bytes);
    let dataset = Arc::new(dataset.with_memory_budget(memory));
    let owner = Ownership {
        // SAFETY: getuid/getgid cannot fail.
        uid: args.uid.unwrap_or_else(|| unsafe { libc::getuid() }),
        // SAFETY: as above.
        gid: args.gid.unwrap_or_else(|| unsafe { libc::getgid() }),
        mtime: dataset.root_modified().unwrap_or(std::time::UNIX_EPOCH),
    };
    let config = NamespaceConfig {
        cache,
        metadata_ttl: std::time::Duration::from_secs(args.metadata_ttl),
        ..NamespaceConfig::default()
    };
    let namespace = Arc::new(Namespace::new(dataset.clone(), config));
    let info = MountInfo {
        dataset: args.dataset.clone(),
        mountpoint: std::fs::canonicalize(&args.mountpoint)
            .unwrap_or_else(|_| args.mountpoint.clone())
            .display()
            .to_string(),
    };
    let known = Arc::new(KnownRecords::new(dataset.len()));
    let filesystem = SdsFuse::with_stats(namespace.clone(), owner, stats, info)
        .with_passthrough(!args.no_passthrough)
        .with_file_opens(args.file_opens)
        .with_catalog_watch(known.clone());
    let mut fuse_config = fuser::Config::default();
    fuse_config.mount_options = vec![
        fuser::MountOption::FSName(format!("sdsfs:{}", args.dataset)),
        fuser::MountOption::Subtype("sdsfs".into()),
        fuser::MountOption::RO,
        fuser::MountOption::NoDev,
        fuser::MountOption::NoSuid,
    ];
    if args.allow_other {
        fuse_config.acl = fuser::SessionACL::All;
    }
    fuse_config.n_threads = Some(args.threads.max(1));
    let session = fuser::Session::new(filesystem, &args.mountpoint, &fuse_config)
        .map_err(|e| format!("cannot mount on {}: {e}", args.mountpoint.display()))?;
    let notifier = session.notifier();
    let background = session
        .spawn()
        .map_err(|e| format!("cannot start the session: {e}"))?;
    std::thread::Builder::new()
        .name("sdsfs-catalog".into())
        .spawn(move || watch(namespace, known, Box::new(notifier)))
        .map_err(|e| format!("cannot start the catalog watcher: {e}"))?;
    match crate::fs::fuse::raise_read_ahead(&args.mountpoint) {
        Ok(kib) => tracing::debug!(read_ahead_kib = kib, "read-ahead window"),
        Err(why) => tracing::debug!(%why, "read-ahead window left at the kernel's default"),
    }
    tracing::info!(
        dataset = %args.dataset,
        mountpoint = %args.mountpoint.display(),
        snapshot = %dataset.snapshot().snapshot_id,
        records = dataset.len(),
        "mounted"
    );
    report_to_parent("ready");
    notify_systemd(&format!(
        "READY=1\nSTATUS=Serving {} at {}",
        args.dataset,
        args.mountpoint.display()
    ));
    let signalled = wait_for_end(&background, signals);
    notify_systemd("STOPPING=1");
    if !signalled {
        // Unmounted from outside (umount, `sdsfs unmount`, systemd's ExecStop): a clean end.
        tracing::info!(mountpoint = %args.mountpoint.display(), "unmounted");
        return join_without_unmount(background)
            .map_err(|e| format!("session on {} failed: {e}", args.mountpoint.display()));
    }
    tracing::info!(mountpoint = %args.mountpoint.display(), "unmounting");
    let wait = match detach(&args.mountpoint) {
        Ok(Detached::Unmounted) => SESSION_END_WAIT,
        Ok(Detached::Lazily) => {
            tracing::warn!(
                mountpoint = %args.mountpoint.display(),
                "files are still open on the mount: detached lazily; reads of those files fail \
                 once the daemon has exited"
            );
            Duration::ZERO
        }
        // Already gone (unmounted from outside meanwhile) or not permitted: the connection
        // ends with this process either way.
        Err(why) => {
            tracing::warn!(%why, "unmount");
            SESSION_END_WAIT
        }
    };
    end_session(background, wait)
        .map_err(|e| format!("session on {} failed: {e}", args.mountpoint.display()))
}

/// How long a signalled daemon waits for its session to end after unmounting outright.
const SESSION_END_WAIT: Duration = Duration::from_secs(2);

/// Ends the session after this daemon detached its mount, waiting up to `wait` for it. A mount
/// unmounted outright ends its session at once; a lazily detached one lives on while files are
/// open, and is left to end with this process (the kernel aborts the connection when
/// `/dev/fuse` is closed, and those files then read ENOTCONN), since the daemon must not
/// outlive its stop.
fn end_session(background: fuser::BackgroundSession, wait: Duration) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + wait;
    while !background.guard.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if background.guard.is_finished() {
        return join_without_unmount(background);
    }
    tracing::info!("open files still held the session: ending it with the daemon");
    // Never dropped: dropping would unmount the path again, which may hold a new mount by now.
    std::mem::forget(background);
    Ok(())
}

/// Joins the session thread after an unmount from outside, without unmounting again.
///
/// Dropping a `BackgroundSession` (which `join` does) unmounts its mount point unless fuser
/// finds the connection gone, and fuser 0.18's check reads a disconnected `/dev/fuse` (poll
/// reports POLLERR) as still mounted. So a daemon that exits slowly after `umount` would
/// unmount whatever was mounted at the same path in the meantime: a remount by mount(8) or
/// systemd. The session's mount handle and channel are therefore leaked; the process exits
/// right after, and the kernel has already torn the mount down.
fn join_without_unmount(background: fuser::BackgroundSession) -> std::io::Result<()> {
    let background = std::mem::ManuallyDrop::new(background);
    // SAFETY: `background` is never dropped nor used again, so the join handle is moved out of
    // it exactly once.
    let thread = unsafe { std::ptr::read(&background.guard) };
    thread
        .join()
        .map_err(|_| std::io::Error::other("filesystem thread panicked"))?
}

/// Sends `state` to the service manager's notification socket (`sd_notify(3)` protocol: one
/// datagram to the path in `$NOTIFY_SOCKET`; a leading `@` names a Linux abstract socket).
/// Does nothing when the variable is unset; a failure is logged, never fatal.
pub fn notify_systemd(state: &str) {
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = send_notification(&socket, state) {
        tracing::warn!(socket = %socket.to_string_lossy(), error = %e, "cannot notify the service manager");
    }
}

fn send_notification(socket: &std::ffi::OsStr, state: &str) -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let sender = UnixDatagram::unbound()?;
    let name = socket.as_encoded_bytes();
    match name.strip_prefix(b"@") {
        Some(abstract_name) => {
            let address = SocketAddr::from_abstract_name(abstract_name)?;
            sender.send_to_addr(state.as_bytes(), &address)?;
        }
        None if name.starts_with(b"/") => {
            sender.send_to(state.as_bytes(), Path::new(socket))?;
        }
        None => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "only path and abstract (@) sockets are supported",
            ))
        }
    }
    Ok(())
}

/// Blocks SIGINT and SIGTERM in this thread (and every thread spawned after), so only
/// `sigtimedwait` in the main thread sees them.
fn block_termination_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it; pthread_sigmask
    // only changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Returns when a termination signal arrives (`true`) or the session ends on its own, after an
/// external umount (`false`).
fn wait_for_end(session: &fuser::BackgroundSession, signals: &libc::sigset_t) -> bool {
    let timeout = libc::timespec {
        tv_sec: 0,
        tv_nsec: 200_000_000,
    };
    loop {
        // SAFETY: `signals` is an initialised set and `timeout` a valid timespec.
        let signal = unsafe { libc::sigtimedwait(signals, std::ptr::null_mut(), &timeout) };
        if signal > 0 {
            tracing::info!(signal, "termination signal received");
            return true;
        }
        if session.guard.is_finished() {
            return false;
        }
    }
}

/// How an unmount went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detached {
    /// Unmounted outright: nothing held it.
    Unmounted,
    /// Files were still open on it (possibly with its daemon dead): detached from the
    /// namespace lazily, so the path is free at once; the mount itself ends when the last of
    /// those files is closed.
    Lazily,
}

/// `sdsfs unmount`: unmounts `mountpoint`, detaching it lazily when it is busy (saying so on
/// stderr), so that a mount whose daemon died with files open is cleared too.
pub fn unmount(mountpoint: &Path) -> Result<(), String> {
    if detach(mountpoint)? == Detached::Lazily {
        eprintln!(
            "sdsfs: {}: busy (files are still open on it): detached lazily; the path is free \
             now, and those files stay open until closed",
            mountpoint.display()
        );
    }
    Ok(())
}

/// Unmounts `mountpoint`: `umount2` when allowed (root), else `fusermount3 -u`; when the mount
/// is busy, the same lazily (`MNT_DETACH`, `fusermount3 -u -z`). A busy mount cannot be
/// unmounted outright even when its daemon is dead, and left in place it answers ENOTCONN to
/// everyone, including a remount at the same path.
pub fn detach(mountpoint: &Path) -> Result<Detached, String> {
    let path = std::ffi::CString::new(mountpoint.as_os_str().as_bytes())
        .map_err(|_| format!("{}: path contains NUL", mountpoint.display()))?;
    let error = match umount2(&path, 0) {
        Ok(()) => return Ok(Detached::Unmounted),
        Err(error) => error,
    };
    match error.raw_os_error() {
        Some(libc::EBUSY) => match umount2(&path, libc::MNT_DETACH) {
            Ok(()) => Ok(Detached::Lazily),
            Err(e) => Err(format!("cannot unmount {}: {e}", mountpoint.display())),
        },
        Some(libc::EPERM) | Some(libc::EACCES) => fusermount_unmount(mountpoint),
        Some(libc::EINVAL) => Err(format!("{}: not mounted", mountpoint.display())),
        _ => Err(format!("cannot unmount {}: {error}", mountpoint.display())),
    }
}

fn umount2(path: &std::ffi::CStr, flags: i32) -> std::io::Result<()> {
    // SAFETY: `path` is a valid NUL-terminated string.
    match unsafe { libc::umount2(path.as_ptr(), flags) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// `fusermount3 -u` (the unprivileged way), then `-u -z` if that fails (busy).
fn fusermount_unmount(mountpoint: &Path) -> Result<Detached, String> {
    for program in ["fusermount3", "fusermount"] {
        let Ok(plain) = Command::new(program).arg("-u").arg(mountpoint).output() else {
            continue;
        };
        if plain.status.success() {
            return Ok(Detached::Unmounted);
        }
        let lazy = Command::new(program)
            .arg("-u")
            .arg("-z")
            .arg(mountpoint)
            .output()
            .map_err(|e| format!("{program} -u -z {}: {e}", mountpoint.display()))?;
        if lazy.status.success() {
            return Ok(Detached::Lazily);
        }
        return Err(format!(
            "{program} -u {} failed: {}",
            mountpoint.display(),
            String::from_utf8_lossy(&plain.stderr).trim()
        ));
    }
    Err(format!(
        "cannot unmount {}: not permitted and no fusermount3 found",
        mountpoint.display()
    ))
}

/// How long tests and scripts may wait for a mount to appear (kept for callers).
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
