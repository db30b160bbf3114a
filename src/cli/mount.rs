//! `sdsfs mount` and `sdsfs unmount`: the command lines, parsed and handed to [`crate::daemon`].
//!
//! `sdsfs mount` first opens the dataset in the calling process, so a dataset that cannot be
//! opened fails with one line and a nonzero status before anything is mounted or forked; then
//! it mounts in the foreground, or starts a daemon that does ([`crate::daemon::ready`]).
//!
//! As a mount(8) helper: invoked as `mount.fuse.sdsfs` or `mount.sdsfs` (a symlink to this
//! binary), or as `sdsfs SOURCE MOUNTPOINT -o OPTIONS` without the `mount` subcommand (what
//! `mount.fuse3` runs for `fuse.sdsfs` entries), the helper conventions apply: `-o` options,
//! `-t TYPE`, `-n`, `-s` and `-v` are accepted and ignored, and `-f` means "fake" (succeed
//! without mounting), not foreground. See [`helper_invocation`].

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use super::size::{format_size, parse_size};
use crate::cli::CliError;
use crate::daemon::{self, MountSettings};
use crate::fs::cache::MIN_CACHE_BYTES;
use crate::fs::fuse::FileOpens;
use crate::fs::stats::{MountStats, StoreCounter};

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
    /// Memory for decoded records, e.g. 512M or 2G (at least 1M); larger records go to
    /// temporary files.
    #[arg(long, value_name = "BYTES", default_value = "1G", value_parser = parse_cache_size)]
    pub cache_size: u64,
    /// Disk for the temporary files of records decoded outside memory, e.g. 4G; a record
    /// larger than this is refused (EIO).
    #[arg(long, value_name = "BYTES", default_value = "16G", value_parser = parse_size)]
    pub spill_size: u64,
    /// Seconds between re-reads of the annotation catalog (the one mutable object).
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub metadata_ttl: u64,
    /// Threads serving FUSE requests. Sequential reads are decoded ahead by min(N, cores) - 1
    /// more threads (at least 1, at most 4); with 1, each read decodes only what it reads.
    #[arg(long, value_name = "N", default_value_t = crate::fs::namespace::DEFAULT_THREADS)]
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
    /// endpoint_url=URL, region=REGION, allow_http, request_timeout=SECS, no_absolute_references,
    /// cross_store_references; generic options
    /// (defaults, _netdev, nofail, noauto, user, nodev, nosuid, noexec, noatime, x-systemd.*, ...)
    /// are accepted and ignored; rw (which mount(8) adds itself) is accepted and the mount is
    /// read-only all the same.
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
            SdsfsCommand::Unmount { mountpoint } => {
                daemon::unmount(&mountpoint).map_err(CliError::from)
            }
            SdsfsCommand::Status { mountpoint, json } => super::status::status(&mountpoint, json),
            SdsfsCommand::GenerateDocs { dir } => super::docs::generate_docs(&dir),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sdsfs: {}", super::location::one_line(&message.to_string()));
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
pub fn helper_invocation(argv: &[OsString]) -> Option<Result<HelperCall, CliError>> {
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

fn parse_helper_arguments(arguments: &[OsString]) -> Result<HelperCall, CliError> {
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
                return Err(CliError::from(format!(
                    "unsupported helper option {text}; {usage}"
                )))
            }
            _ => positional.push(argument.clone()),
        }
    }
    let [dataset, mountpoint] = positional.as_slice() else {
        return Err(usage.into());
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
        return Err(usage.into());
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
pub fn apply_mount_options(args: &mut MountArgs) -> Result<(), CliError> {
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
            // mount(8) adds `rw` itself (`mount -t fuse.sdsfs`, fstab's `defaults`): the mount
            // is read-only whatever it asks (every write is EROFS).
            "ro" | "rw" => {}
            "allow_other" => args.allow_other = true,
            "uid" => args.uid = Some(parse_number(name, value.ok_or_else(missing)?)?),
            "gid" => args.gid = Some(parse_number(name, value.ok_or_else(missing)?)?),
            "cache_size" => args.cache_size = parse_cache_size(value.ok_or_else(missing)?)?,
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
                    .map_err(CliError::failed(format!("mount option {name}")))?
            }
            "endpoint_url" => args.store.endpoint_url = Some(value.ok_or_else(missing)?.into()),
            "region" => args.store.region = Some(value.ok_or_else(missing)?.into()),
            "allow_http" => args.store.allow_http = true,
            "request_timeout" => {
                let value = value.ok_or_else(missing)?;
                let timeout = super::location::parse_seconds(value)
                    .map_err(CliError::failed(format!("mount option {name}")))?;
                args.store.request_timeout = Some(timeout);
            }
            "no_absolute_references" => args.store.no_absolute_references = true,
            "cross_store_references" => args.cross_store_references = true,
            _ if is_generic_option(name) => {}
            _ => return Err(CliError::from(format!("unknown mount option {name:?}"))),
        }
    }
    Ok(())
}

/// A `--cache-size`: a size ([`parse_size`]) of at least [`MIN_CACHE_BYTES`], the least the
/// mount's caches and indexes work in; a smaller one is refused, naming the minimum.
fn parse_cache_size(text: &str) -> Result<u64, CliError> {
    let bytes = parse_size(text)?;
    if bytes < MIN_CACHE_BYTES {
        return Err(CliError::from(format!(
            "cache size {text:?} is below the minimum, {}",
            format_size(MIN_CACHE_BYTES)
        )));
    }
    Ok(bytes)
}

fn parse_number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, CliError> {
    value
        .parse()
        .map_err(|_| CliError::from(format!("mount option {name}={value}: not a number")))
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

/// The daemon's settings from the parsed arguments.
fn settings(args: &MountArgs) -> MountSettings {
    MountSettings {
        dataset: args.dataset.clone(),
        mountpoint: args.mountpoint.clone(),
        allow_other: args.allow_other,
        uid: args.uid,
        gid: args.gid,
        cache_size: args.cache_size,
        spill_size: args.spill_size,
        metadata_ttl: args.metadata_ttl,
        threads: args.threads,
        passthrough: !args.no_passthrough,
        file_opens: args.file_opens,
    }
}

fn mount(mut args: MountArgs) -> Result<(), CliError> {
    crate::fs::cache::bound_allocator();
    apply_mount_options(&mut args)?;
    args.store.same_store_only = args.allow_other && !args.cross_store_references;
    // Checked here too so that a daemonizing mount fails before it forks; the daemon opens
    // and checks it again, and mounts through what it opened.
    let point = daemon::check_mountpoint(&args.mountpoint, args.nonempty)?;
    // Opening here too makes a bad dataset fail before anything is mounted or forked.
    let stats = Arc::new(MountStats::default());
    let counted = stats.clone();
    let dataset = args
        .store
        .open_dataset_with(&args.dataset, move |store, backend| {
            Arc::new(StoreCounter::wrap(store, backend, counted))
        })
        .map_err(CliError::from)?;
    crate::fs::namespace::check_servable(&dataset)?;
    if args.foreground {
        Ok(daemon::run_foreground(
            settings(&args),
            point,
            dataset,
            stats,
        )?)
    } else {
        drop((dataset, point));
        Ok(daemon::ready::spawn(
            daemon_arguments(&args),
            args.log_file.as_deref(),
        )?)
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

/// How long tests and scripts may wait for a mount to appear (kept for callers).
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
