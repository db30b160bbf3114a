//! Confinement of references (RELIABILITY.md, "Confinement"): a mount or an `sds` command
//! never serves bytes, nor reveals facts about an object, that the owner of the dataset's
//! `root.json` could not read; a mount that admits other users follows references into
//! another store only when told to.
//!
//! Runs as root (as the suite does) and acts as `nobody` through `setpriv`; "another user's"
//! dataset is one chowned to 65534. The truth each check compares with is the OS (what
//! `nobody` may read directly) and the capture bytes the test itself wrote.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::cli::{ok, sds, sds_env};
use common::cloud::{upload_tree, CloudServer};
use common::mount::MountGuard;

const NOBODY: &str = "65534";

/// What `nobody` is refused by the kernel when it reads a file directly.
const PERMISSION_DENIED: &str = "Permission denied";

/// The reason the log and `sds` give for a confined reference.
const OWNER_CANNOT_READ: &str = "nobody (uid 65534) who owns root.json cannot read";

/// A scratch directory every user may search (tempdirs are 0700).
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    set_mode(dir.path(), 0o755);
    dir
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn chown_to_nobody(path: &Path) {
    let owner = format!("{NOBODY}:{NOBODY}");
    let status = Command::new("chown")
        .args(["-R", &owner])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "chown -R {}", path.display());
}

/// 64 complex64 samples, little-endian: what `iq.raw` must hold, byte for byte.
fn capture_bytes() -> Vec<u8> {
    (0..64u16)
        .flat_map(|k| {
            let re = f32::from(k) * 0.5;
            let im = -f32::from(k);
            [re.to_le_bytes(), im.to_le_bytes()].concat()
        })
        .collect()
}

/// `sds create DIR --from-raw capture.bin` of [`capture_bytes`]: one record, id `capture`.
fn create_dataset(dir: &Path) {
    let capture = dir.with_file_name("capture.bin");
    std::fs::write(&capture, capture_bytes()).unwrap();
    ok(&[
        "create",
        dir.to_str().unwrap(),
        "--from-raw",
        capture.to_str().unwrap(),
        "--datatype",
        "cf32_le",
        "--sample-rate",
        "1e6",
        "-q",
    ]);
}

/// `sds select SOURCE DEST --indices 0`: a reference view (absolute references to SOURCE).
fn select_view(source: &str, dest: &Path, env: &[(&str, String)]) {
    let out = sds_env(
        &[
            "select",
            source,
            dest.to_str().unwrap(),
            "--indices",
            "0",
            "--dataset-id",
            "view",
            "--snapshot-id",
            "view-1",
        ],
        env,
    );
    assert!(out.status.success(), "{}", text(&out));
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Creates `base/private` (root's, 0700) and `base/shared` (0755).
fn private_and_shared(base: &Path, private: &str, shared: &str) -> (PathBuf, PathBuf) {
    let (private, shared) = (base.join(private), base.join(shared));
    std::fs::create_dir(&private).unwrap();
    set_mode(&private, 0o700);
    std::fs::create_dir(&shared).unwrap();
    (private, shared)
}

/// `program` run as `nobody` (no supplementary groups).
fn as_nobody(program: &str) -> Command {
    let mut command = Command::new("setpriv");
    command.args([
        &format!("--reuid={NOBODY}"),
        &format!("--regid={NOBODY}"),
        "--clear-groups",
        program,
    ]);
    command
}

/// `cat PATH` as `nobody`: the bytes, or its stderr.
fn read_as_nobody(path: &Path) -> Result<Vec<u8>, String> {
    let out = as_nobody("cat").arg(path).output().unwrap();
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Mounts `dataset` as root with `extra` and `env`, its mount point reachable by `nobody`.
fn mount_for_everyone(dataset: &Path, extra: &[&str], env: &[(&str, String)]) -> MountGuard {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mount = MountGuard::mount_with_env(dataset.as_os_str(), extra, &env);
    set_mode(mount.mountpoint.parent().unwrap(), 0o755);
    mount
}

/// A refused reference or path answers EACCES, whoever asks.
fn assert_refused(path: &Path) {
    let err = std::fs::read(path).expect_err("read through the mount succeeded");
    assert_eq!(
        err.raw_os_error(),
        Some(libc::EACCES),
        "{}: {err}",
        path.display()
    );
}

/// The files of record 0 a reader wants: its document and its samples.
const RECORD_FILES: [&str; 2] = ["records/0/record.json", "records/0/fields/iq.raw"];

/// Asserts that record 0 reads back as written: `iq.raw` is the capture byte for byte and
/// `record.json` names the capture.
fn assert_record_reads_back(read: impl Fn(&Path) -> Result<Vec<u8>, String>, mount: &MountGuard) {
    let raw = read(&mount.path(RECORD_FILES[1])).unwrap();
    assert!(raw == capture_bytes(), "iq.raw differs from the capture");
    let json: serde_json::Value =
        serde_json::from_slice(&read(&mount.path(RECORD_FILES[0])).unwrap()).unwrap();
    assert_eq!(json["id"], "capture", "{json}");
}

#[test]
fn a_view_into_a_root_only_dataset_serves_nothing_of_it() {
    let base = scratch();
    let (secret, shared) = private_and_shared(base.path(), "secret", "shared");
    create_dataset(&secret.join("ds"));
    select_view(
        secret.join("ds").to_str().unwrap(),
        &shared.join("view"),
        &[],
    );
    chown_to_nobody(&shared);
    // The OS's own answer: nobody cannot read the secret dataset.
    let direct = read_as_nobody(&secret.join("ds/root.json")).unwrap_err();
    assert!(direct.contains(PERMISSION_DENIED), "{direct}");

    let mount = mount_for_everyone(&shared.join("view"), &["--allow-other"], &[]);
    for file in RECORD_FILES {
        let refused = read_as_nobody(&mount.path(file)).unwrap_err();
        assert!(refused.contains(PERMISSION_DENIED), "{file}: {refused}");
        // Whoever asks: the confinement is the owner's, not the caller's.
        assert_refused(&mount.path(file));
    }
    let log = mount.log_text();
    assert!(log.contains(OWNER_CANNOT_READ), "{log}");
    assert!(log.contains(secret.to_str().unwrap()), "{log}");
    drop(mount);

    let verify = sds(&["verify", shared.join("view").to_str().unwrap()]);
    assert!(!verify.status.success(), "{}", text(&verify));
    assert!(
        text(&verify).contains(OWNER_CANNOT_READ),
        "{}",
        text(&verify)
    );
}

/// Points the data shard of the view's only entry at `location` and fixes up the sizes of
/// the documents above it (page in the snapshot, snapshot in `root.json`).
fn retarget_view(view: &Path, location: &str) {
    let read = |rel: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(view.join(rel)).unwrap()).unwrap()
    };
    let write = |rel: &str, value: &serde_json::Value| -> u64 {
        let text = serde_json::to_string_pretty(value).unwrap();
        std::fs::write(view.join(rel), &text).unwrap();
        text.len() as u64
    };
    let mut root = read("root.json");
    let snapshot_rel = root["snapshot"]["path"].as_str().unwrap().to_string();
    let mut snapshot = read(&snapshot_rel);
    let page_rel = snapshot["manifests"][0]["object"]["path"]
        .as_str()
        .unwrap()
        .to_string();
    let mut page = read(&page_rel);
    page["shards"][0]["data"]["path"] = location.into();
    snapshot["manifests"][0]["object"]["stored_bytes"] = write(&page_rel, &page).into();
    root["snapshot"]["stored_bytes"] = write(&snapshot_rel, &snapshot).into();
    write("root.json", &root);
}

/// Every decimal number in `text`.
fn numbers(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .collect()
}

#[test]
fn a_view_naming_etc_shadow_is_refused_without_its_size() {
    let shadow = Path::new("/etc/shadow");
    let shadow_size = std::fs::metadata(shadow).unwrap().len().to_string();
    let direct = read_as_nobody(shadow).unwrap_err();
    assert!(direct.contains(PERMISSION_DENIED), "{direct}");
    let base = scratch();
    create_dataset(&base.path().join("src"));
    let view = base.path().join("view");
    select_view(base.path().join("src").to_str().unwrap(), &view, &[]);
    retarget_view(&view, "/etc/shadow");
    chown_to_nobody(&view);

    for deep in [false, true] {
        let mut args = vec!["verify", view.to_str().unwrap()];
        args.extend(deep.then_some("--deep"));
        let verify = sds(&args);
        let shown = text(&verify);
        assert!(!verify.status.success(), "{shown}");
        assert!(shown.contains(OWNER_CANNOT_READ), "{shown}");
        assert!(shown.contains("/etc/shadow"), "{shown}");
        assert!(
            !numbers(&shown).contains(&shadow_size.as_str()),
            "/etc/shadow's size {shadow_size} shown: {shown}"
        );
    }
    let mount = mount_for_everyone(&view, &["--allow-other"], &[]);
    assert_refused(&mount.path(RECORD_FILES[1]));
    let log = mount.log_text();
    assert!(
        log.contains(OWNER_CANNOT_READ) && log.contains("/etc/shadow"),
        "{log}"
    );
}

#[test]
fn a_view_over_the_owners_own_dataset_reads_byte_exact() {
    let base = scratch();
    let home = base.path().join("home");
    std::fs::create_dir(&home).unwrap();
    create_dataset(&home.join("src"));
    select_view(home.join("src").to_str().unwrap(), &home.join("view"), &[]);
    chown_to_nobody(&home);
    set_mode(&home, 0o700);

    let mount = mount_for_everyone(&home.join("view"), &["--allow-other"], &[]);
    assert_record_reads_back(read_as_nobody, &mount);
    assert_record_reads_back(|p| std::fs::read(p).map_err(|e| e.to_string()), &mount);
    drop(mount);
    ok(&["verify", "--deep", home.join("view").to_str().unwrap()]);
}

#[test]
fn a_root_only_file_inside_the_owners_dataset_is_refused() {
    let base = scratch();
    let dataset = base.path().join("ds");
    create_dataset(&dataset);
    chown_to_nobody(&dataset);
    // As a hard link to a file nobody cannot read would: root's, mode 0600, below the root.
    let data = std::fs::read_dir(dataset.join("objects/data"))
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .next()
        .unwrap();
    std::os::unix::fs::chown(&data, Some(0), Some(0)).unwrap();
    set_mode(&data, 0o600);
    assert!(read_as_nobody(&data)
        .unwrap_err()
        .contains(PERMISSION_DENIED));

    let mount = mount_for_everyone(&dataset, &["--allow-other"], &[]);
    // The metadata row is the owner's: the record's document reads; its samples do not.
    let json = read_as_nobody(&mount.path(RECORD_FILES[0])).unwrap();
    assert!(serde_json::from_slice::<serde_json::Value>(&json).is_ok());
    assert_refused(&mount.path(RECORD_FILES[1]));
    let log = mount.log_text();
    assert!(
        log.contains(OWNER_CANNOT_READ) && log.contains(data.to_str().unwrap()),
        "{log}"
    );
}

#[test]
fn cross_store_references_need_an_option_on_a_mount_for_everyone() {
    let server = CloudServer::moto(&["bucket"]);
    let env = server.env();
    let base = scratch();
    create_dataset(&base.path().join("src"));
    upload_tree(&server.store("bucket/src"), &base.path().join("src"));
    let view = base.path().join("view");
    select_view("s3://bucket/src", &view, &env);
    let page = std::fs::read_to_string(
        walkdir_first(&view.join("manifests")).expect("the view's manifest page"),
    )
    .unwrap();
    assert!(page.contains("\"s3://bucket/src/objects/data/"), "{page}");

    let refused = mount_for_everyone(&view, &["--allow-other"], &env);
    for file in RECORD_FILES {
        assert_refused(&refused.path(file));
    }
    let log = refused.log_text();
    assert!(log.contains("cross-store reference refused"), "{log}");
    assert!(log.contains("s3://bucket/src/objects/"), "{log}");
    drop(refused);

    let allowed = mount_for_everyone(&view, &["-o", "allow_other,cross_store_references"], &env);
    assert_record_reads_back(read_as_nobody, &allowed);
    drop(allowed);
    // Without allow_other nothing changes: the mounting user's own credentials, for them.
    let private = mount_for_everyone(&view, &[], &env);
    assert_record_reads_back(|p| std::fs::read(p).map_err(|e| e.to_string()), &private);
}

/// The first regular file below `dir`.
fn walkdir_first(dir: &Path) -> Option<PathBuf> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).ok()? {
            let path = entry.ok()?.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                return Some(path);
            }
        }
    }
    None
}

mod walks {
    //! The walk to a confined root, against what `nobody` is allowed by the OS (checked with
    //! `setpriv ... test -x`).

    use super::*;
    use sdsfs::format::path::RelPath;
    use sdsfs::storage::{Identity, LocalStore, ObjectStore, StorageError};
    use std::sync::Arc;

    fn nobody() -> Arc<Identity> {
        Arc::new(Identity::of_user(65534, 65534))
    }

    /// Whether `nobody` may search `dir`, as the kernel says.
    fn nobody_may_search(dir: &Path) -> bool {
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "test",
                "-x",
            ])
            .arg(dir)
            .status()
            .unwrap()
            .success()
            && Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", "ls"])
                .arg(dir.join("."))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap()
                .success()
    }

    /// `base/private` (0700, root), `base/public` (0755) holding `object` (0644) and
    /// `hidden` (0600), and symlinks both ways.
    fn tree() -> tempfile::TempDir {
        let base = scratch();
        let (private, public) = private_and_shared(base.path(), "private", "public");
        std::fs::write(public.join("object"), b"readable").unwrap();
        std::fs::write(public.join("hidden"), b"secret").unwrap();
        set_mode(&public.join("hidden"), 0o600);
        std::fs::create_dir(private.join("inner")).unwrap();
        std::os::unix::fs::symlink(&public, private.join("to-public")).unwrap();
        std::os::unix::fs::symlink("../private/inner", public.join("to-private")).unwrap();
        std::os::unix::fs::symlink("../public", public.join("to-self")).unwrap();
        base
    }

    /// Sets `path`'s POSIX access ACL to `owner`, a named entry for `nobody`, the owning
    /// `group`, `other` and the mask setfacl(1) would compute (the union of the named and
    /// group entries), encoded by hand as `linux/posix_acl_xattr.h` lays it out: version 2,
    /// then (tag, perm, id) entries in tag order (1 owner, 2 named user, 4 owning group, 0x10
    /// mask, 0x20 other).
    fn set_acl(path: &Path, owner: u16, nobody: u16, group: u16, other: u16) {
        const NO_ID: u32 = u32::MAX;
        let entries = [
            (1u16, owner, NO_ID),
            (2, nobody, 65534),
            (4, group, NO_ID),
            (0x10, nobody | group, NO_ID),
            (0x20, other, NO_ID),
        ];
        let mut raw = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in entries {
            raw.extend(tag.to_le_bytes());
            raw.extend(perm.to_le_bytes());
            raw.extend(id.to_le_bytes());
        }
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: both strings are NUL-terminated and `raw` is readable for its length.
        let ret = unsafe {
            libc::setxattr(
                c_path.as_ptr(),
                c"system.posix_acl_access".as_ptr(),
                raw.as_ptr().cast(),
                raw.len(),
                0,
            )
        };
        assert_eq!(ret, 0, "setxattr: {}", std::io::Error::last_os_error());
    }

    #[test]
    fn posix_acls_decide_as_the_kernel_decides() {
        let base = scratch();
        // A root-only directory that nobody may search through a named entry, holding a
        // root-only file nobody may read through one and a world-readable file nobody may
        // not read through one.
        let dir = base.path().join("acl");
        std::fs::create_dir(&dir).unwrap();
        set_mode(&dir, 0o700);
        set_acl(&dir, 7, 1, 0, 0);
        std::fs::write(dir.join("granted"), b"granted").unwrap();
        set_mode(&dir.join("granted"), 0o600);
        set_acl(&dir.join("granted"), 6, 4, 0, 0);
        std::fs::write(dir.join("denied"), b"denied").unwrap();
        set_acl(&dir.join("denied"), 6, 0, 4, 4);
        // The kernel's answer.
        assert_eq!(read_as_nobody(&dir.join("granted")).unwrap(), b"granted");
        assert!(read_as_nobody(&dir.join("denied"))
            .unwrap_err()
            .contains(PERMISSION_DENIED));

        let store = LocalStore::open_as(&dir, nobody()).unwrap();
        let granted = RelPath::new("granted").unwrap();
        assert_eq!(&store.read(&granted, None).unwrap()[..], b"granted");
        match store.read(&RelPath::new("denied").unwrap(), None) {
            Err(StorageError::Unreadable { .. }) => {}
            other => panic!("an ACL denying the owner was not seen: {other:?}"),
        }
    }

    fn refused(result: Result<LocalStore, StorageError>) -> String {
        match result {
            Err(e @ StorageError::Unreadable { .. }) => e.to_string(),
            other => panic!("not refused for the owner: {other:?}"),
        }
    }

    #[test]
    fn every_directory_on_the_way_is_checked_symlinks_and_dot_dot_included() {
        let base = tree();
        let at = |rel: &str| base.path().join(rel);
        assert!(!nobody_may_search(&at("private/to-public")));
        assert!(!nobody_may_search(&at("public/to-private")));
        assert!(nobody_may_search(&at("public/to-self/to-self")));
        // Through the private directory to a public one: the walk is refused at the first.
        let message = refused(LocalStore::open_as(&at("private/to-public"), nobody()));
        assert!(
            message.contains(&format!("{}", at("private").display())),
            "{message}"
        );
        // A public symlink into the private directory, and `..` back into it.
        refused(LocalStore::open_as(&at("public/to-private"), nobody()));
        refused(LocalStore::open_as(
            &at("public/../private/inner"),
            nobody(),
        ));
        // What does not exist in a directory the owner cannot search is not told apart.
        refused(LocalStore::open_as(&at("private/absent"), nobody()));
        // Public symlinks to public directories are followed.
        let store = LocalStore::open_as(&at("public/to-self/to-self"), nobody()).unwrap();
        let object = RelPath::new("object").unwrap();
        assert_eq!(&store.read(&object, None).unwrap()[..], b"readable");
        let hidden = RelPath::new("hidden").unwrap();
        assert!(read_as_nobody(&at("public/hidden")).is_err());
        match store.info(&hidden, None) {
            Err(StorageError::Unreadable { .. }) => {}
            other => panic!("the size of a file the owner cannot read: {other:?}"),
        }
    }
}
