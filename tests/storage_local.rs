//! Behaviour of the local object store: reads, confinement, create-only writes, generations and
//! compare-and-swap, including races between threads and between processes.

mod common;
#[allow(unused_imports)]
use common::datasets::Counting as _;

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::thread;

use rand::RngCore;
use sdsfs::format::path::RelPath;
use sdsfs::storage::{CreateOutcome, LocalStore, ObjectReader, ObjectStore, StorageError, Version};

fn rel(path: &str) -> RelPath {
    RelPath::new(path).unwrap()
}

/// A store rooted at `<tmp>/root`, leaving `<tmp>` itself as "outside the root".
fn setup() -> (tempfile::TempDir, PathBuf, LocalStore) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    fs::create_dir(&root).unwrap();
    let store = LocalStore::open(&root).unwrap();
    (tmp, root, store)
}

fn random_bytes(len: usize) -> Vec<u8> {
    let mut data = vec![0u8; len];
    rand::thread_rng().fill_bytes(&mut data);
    data
}

/// Every file name anywhere below `dir`.
fn all_names(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        names.push(entry.file_name().to_string_lossy().into_owned());
        if entry.file_type().unwrap().is_dir() {
            names.extend(all_names(&entry.path()));
        }
    }
    names
}

fn assert_no_temp_files(root: &Path) {
    let temps: Vec<String> = all_names(root)
        .into_iter()
        .filter(|n| n.starts_with(".tmp-"))
        .collect();
    assert!(temps.is_empty(), "temporary files left behind: {temps:?}");
}

// ---------------------------------------------------------------------------------------------
// Reads

#[test]
fn read_whole_range_and_info() {
    let (_tmp, root, store) = setup();
    let data = random_bytes(10_000);
    fs::create_dir_all(root.join("a/b")).unwrap();
    fs::write(root.join("a/b/obj"), &data).unwrap();
    let path = rel("a/b/obj");

    assert_eq!(store.read(&path, None).unwrap(), data);
    assert_eq!(
        store.read_range(&path, 100..164, None).unwrap(),
        data[100..164]
    );
    assert_eq!(store.read_range(&path, 0..10_000, None).unwrap(), data);
    let info = store.info(&path, None).unwrap();
    assert_eq!(info.size, 10_000);
    assert!(info.version.generation.is_some());
    assert!(info.modified.is_some());
    assert_eq!(
        store.describe(&path),
        root.join("a/b/obj").display().to_string()
    );
}

#[test]
fn read_range_bounds() {
    let (_tmp, root, store) = setup();
    fs::write(root.join("obj"), b"0123456789").unwrap();
    let path = rel("obj");
    assert!(store.read_range(&path, 0..0, None).unwrap().is_empty());
    assert!(store.read_range(&path, 10..10, None).unwrap().is_empty());
    // Start after end is refused too, built from variables to keep the lint quiet.
    let (seven, three) = (7, 3);
    for range in [5..11, 10..11, 11..11, 20..30, seven..three] {
        match store.read_range(&path, range.clone(), None) {
            Err(StorageError::OutOfRange {
                start, end, size, ..
            }) => assert_eq!((start, end, size), (range.start, range.end, 10)),
            other => panic!("{range:?}: expected OutOfRange, got {other:?}"),
        }
    }
}

/// Reads `parts` of `path` from `offset` with `storage::read_split` into three buffers, the first
/// already holding a prefix that must stay.
fn split_read(
    store: &dyn ObjectStore,
    path: &RelPath,
    offset: u64,
    parts: &[(usize, usize)],
) -> Result<[Vec<u8>; 3], StorageError> {
    let mut outs = [b"kept".to_vec(), Vec::new(), Vec::new()];
    for (out, buf) in outs.iter_mut().enumerate() {
        let room: usize = parts.iter().filter(|p| p.0 == out).map(|p| p.1).sum();
        buf.reserve_exact(room);
    }
    let [a, b, c] = &mut outs;
    sdsfs::storage::read_split(store, path, offset, parts, &mut [a, b, c], None)?;
    Ok(outs)
}

#[test]
fn split_reads_put_each_part_in_its_buffer() {
    let (_tmp, root, store) = setup();
    let data = random_bytes(400_000);
    fs::create_dir_all(root.join("objects/ab")).unwrap();
    fs::write(root.join("objects/ab/obj"), &data).unwrap();
    let path = rel("objects/ab/obj");
    // A block layout (header, data, header, data, ...) and then 3,000 tiny parts: more than
    // one preadv call can take (1,024 iovecs).
    let mut parts = vec![(0, 24), (1, 65_512), (0, 24), (1, 65_512), (2, 7)];
    parts.extend((0..3000).map(|i| (i % 3, 1 + i % 5)));
    let offset = 1_000u64;
    let mut expected = [b"kept".to_vec(), Vec::new(), Vec::new()];
    let mut at = offset as usize;
    for &(out, len) in &parts {
        expected[out].extend_from_slice(&data[at..at + len]);
        at += len;
    }
    assert_eq!(split_read(&store, &path, offset, &parts).unwrap(), expected);

    // The same through a store that only has the default (read_range, then split).
    let local: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(&root).unwrap());
    let plain = common::datasets::CountingStore::new(local);
    assert_eq!(split_read(&plain, &path, offset, &parts).unwrap(), expected);

    // Past the end: refused before reading, naming the object.
    let parts = [(1, 100), (2, (data.len() - 50) as u64 as usize)];
    match split_read(&store, &path, 0, &parts) {
        Err(StorageError::OutOfRange {
            object, end, size, ..
        }) => {
            assert!(object.contains("objects/ab/obj"), "{object}");
            assert_eq!((end, size), (data.len() as u64 + 50, data.len() as u64));
        }
        other => panic!("expected OutOfRange, got {other:?}"),
    }
}

#[test]
fn missing_objects_are_not_found() {
    let (_tmp, root, store) = setup();
    fs::create_dir(root.join("dir")).unwrap();
    for path in ["absent", "dir/absent", "no/such/dir/obj"] {
        let path = rel(path);
        let err = store.read(&path, None).unwrap_err();
        assert!(err.is_not_found(), "{err}");
        assert!(err.to_string().contains(path.as_str()), "{err}");
        assert!(store.info(&path, None).unwrap_err().is_not_found());
        assert!(store
            .read_range(&path, 0..0, None)
            .unwrap_err()
            .is_not_found());
        assert!(store.read_versioned(&path).unwrap().is_none());
    }
}

#[test]
fn read_limited_refuses_oversized_object_without_reading_it() {
    let (_tmp, root, store) = setup();
    // A sparse 64 GiB file: reading it whole would exhaust memory, so a refusal here proves
    // the size was checked before reading.
    let huge = 64u64 << 30;
    fs::File::create(root.join("huge"))
        .unwrap()
        .set_len(huge)
        .unwrap();
    match store.read_limited(&rel("huge"), None, 1 << 20) {
        Err(StorageError::TooLarge { size, limit, .. }) => {
            assert_eq!((size, limit), (huge, 1 << 20))
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    fs::write(root.join("small"), b"12345").unwrap();
    assert_eq!(
        store.read_limited(&rel("small"), None, 5).unwrap(),
        &b"12345"[..]
    );
    assert!(matches!(
        store.read_limited(&rel("small"), None, 4),
        Err(StorageError::TooLarge {
            size: 5,
            limit: 4,
            ..
        })
    ));
}

#[test]
fn non_regular_files_are_refused() {
    let (_tmp, root, store) = setup();
    fs::create_dir(root.join("adir")).unwrap();
    let err = store.read(&rel("adir"), None).unwrap_err();
    assert!(matches!(err, StorageError::Invalid { .. }), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Confinement

fn assert_symlink_refused(result: Result<impl std::fmt::Debug, StorageError>, what: &str) {
    match result {
        Err(StorageError::SymlinkRefused { object }) => assert!(!object.is_empty()),
        other => panic!("{what}: expected SymlinkRefused, got {other:?}"),
    }
}

/// Every operation on `path` must refuse the symlink on its way.
fn assert_all_refused(store: &LocalStore, path: &str) {
    let path = rel(path);
    assert_symlink_refused(store.read(&path, None), "read");
    assert_symlink_refused(store.read_range(&path, 0..1, None), "read_range");
    assert_symlink_refused(store.info(&path, None), "info");
    assert_symlink_refused(store.read_versioned(&path), "read_versioned");
    assert_symlink_refused(store.create(&path, b"new"), "create");
    assert_symlink_refused(store.compare_and_swap(&path, b"new", None), "cas");
}

#[test]
fn symlink_to_outside_file_is_refused() {
    let (tmp, root, store) = setup();
    let secret = tmp.path().join("secret");
    fs::write(&secret, b"secret").unwrap();
    symlink(&secret, root.join("link")).unwrap();
    assert_all_refused(&store, "link");
    assert_eq!(fs::read(&secret).unwrap(), b"secret");
}

#[test]
fn symlink_to_outside_directory_is_refused() {
    let (tmp, root, store) = setup();
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("file"), b"secret").unwrap();
    symlink(&outside, root.join("dirlink")).unwrap();
    assert_all_refused(&store, "dirlink/file");
    assert_all_refused(&store, "dirlink/new");
    assert_all_refused(&store, "dirlink/sub/new");
    assert_all_refused(&store, "dirlink");
    let mut names = all_names(&outside);
    names.sort();
    assert_eq!(names, ["file"], "nothing may be written outside the root");
}

#[test]
fn symlinked_intermediate_directory_inside_root_is_refused() {
    let (_tmp, root, store) = setup();
    fs::create_dir_all(root.join("real/sub")).unwrap();
    fs::write(root.join("real/sub/obj"), b"data").unwrap();
    symlink(root.join("real"), root.join("alias")).unwrap();
    symlink("obj", root.join("real/sub/relative-link")).unwrap();
    assert_all_refused(&store, "alias/sub/obj");
    assert_all_refused(&store, "real/sub/relative-link");
    // The real path still works.
    assert_eq!(
        store.read(&rel("real/sub/obj"), None).unwrap(),
        &b"data"[..]
    );
}

#[test]
fn dot_dot_never_reaches_the_store() {
    assert!(RelPath::new("../secret").is_err());
    assert!(RelPath::new("a/../../secret").is_err());
}

// ---------------------------------------------------------------------------------------------
// Create-only

#[test]
fn create_then_identical_then_collision() {
    let (_tmp, root, store) = setup();
    let path = rel("objects/data/ab/abcd.arrayrecord");
    assert_eq!(
        store.create(&path, b"first").unwrap(),
        CreateOutcome::Created
    );
    assert_eq!(
        store.create(&path, b"first").unwrap(),
        CreateOutcome::AlreadyIdentical
    );
    for different in [&b"other"[..], b"firs", b"first!", b""] {
        let err = store.create(&path, different).unwrap_err();
        assert!(matches!(err, StorageError::Collision { .. }), "{err}");
        assert!(err.to_string().contains("abcd.arrayrecord"), "{err}");
    }
    assert_eq!(
        fs::read(root.join("objects/data/ab/abcd.arrayrecord")).unwrap(),
        b"first"
    );
    assert_no_temp_files(&root);
}

#[test]
fn create_empty_object() {
    let (_tmp, _root, store) = setup();
    let path = rel("empty");
    assert_eq!(store.create(&path, b"").unwrap(), CreateOutcome::Created);
    assert_eq!(
        store.create(&path, b"").unwrap(),
        CreateOutcome::AlreadyIdentical
    );
    assert!(store.read(&path, None).unwrap().is_empty());
}

#[test]
fn create_from_file_streams_and_compares() {
    let (tmp, root, store) = setup();
    // Larger than the 1 MiB streaming chunk, and not a multiple of it.
    let data = random_bytes((3 << 20) + 17);
    let source = tmp.path().join("source");
    fs::write(&source, &data).unwrap();
    let path = rel("objects/data/00/shard.arrayrecord");

    assert_eq!(
        store.create_from_file(&path, &source).unwrap(),
        CreateOutcome::Created
    );
    assert_eq!(store.read(&path, None).unwrap(), data);
    assert_eq!(
        store.create_from_file(&path, &source).unwrap(),
        CreateOutcome::AlreadyIdentical
    );
    assert_eq!(
        store.create(&path, &data).unwrap(),
        CreateOutcome::AlreadyIdentical
    );

    // Same length, differing only in the very last byte (last, partial chunk).
    let mut last_differs = data.clone();
    *last_differs.last_mut().unwrap() ^= 1;
    let other = tmp.path().join("other");
    fs::write(&other, &last_differs).unwrap();
    let err = store.create_from_file(&path, &other).unwrap_err();
    assert!(matches!(err, StorageError::Collision { .. }), "{err}");
    fs::write(&other, &data[..data.len() - 1]).unwrap();
    let err = store.create_from_file(&path, &other).unwrap_err();
    assert!(matches!(err, StorageError::Collision { .. }), "{err}");

    assert_eq!(store.read(&path, None).unwrap(), data);
    let missing = store
        .create_from_file(&rel("x"), &tmp.path().join("missing"))
        .unwrap_err();
    assert!(missing.to_string().contains("missing"), "{missing}");
    assert_no_temp_files(&root);
}

#[test]
fn adopt_file_links_without_copying_and_stays_create_only() {
    use std::os::unix::fs::MetadataExt;
    let (tmp, root, store) = setup();
    let data = random_bytes((1 << 20) + 5);
    let staged = store
        .local_root()
        .expect("a local store stages beside its objects");
    assert_eq!(staged, root.as_path());
    let source = root.join(".staged-shard");
    fs::write(&source, &data).unwrap();
    let path = rel("objects/data/ab/shard.arrayrecord");

    assert_eq!(
        store.adopt_file(&path, &source).unwrap(),
        CreateOutcome::Created
    );
    let object = root.join(path.as_str());
    // The object is the staged file itself: same inode, no second copy of the bytes.
    assert_eq!(
        fs::metadata(&object).unwrap().ino(),
        fs::metadata(&source).unwrap().ino()
    );
    fs::remove_file(&source).unwrap();
    assert_eq!(store.read(&path, None).unwrap(), data);

    // Create-only, like every other create: identical content is fine, different is refused.
    let again = root.join(".staged-again");
    fs::write(&again, &data).unwrap();
    assert_eq!(
        store.adopt_file(&path, &again).unwrap(),
        CreateOutcome::AlreadyIdentical
    );
    let mut differs = data.clone();
    differs[7] ^= 1;
    fs::write(&again, &differs).unwrap();
    let err = store.adopt_file(&path, &again).unwrap_err();
    assert!(matches!(err, StorageError::Collision { .. }), "{err}");
    assert_eq!(store.read(&path, None).unwrap(), data);

    // Outside the store's filesystem a link is impossible: the bytes are copied instead.
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        let foreign = tempfile::NamedTempFile::new_in(shm).unwrap();
        fs::write(foreign.path(), &differs).unwrap();
        let copied = rel("objects/data/cd/other.arrayrecord");
        assert_eq!(
            store.adopt_file(&copied, foreign.path()).unwrap(),
            CreateOutcome::Created
        );
        assert_eq!(store.read(&copied, None).unwrap(), differs);
    }
    let missing = store
        .adopt_file(&rel("y"), &tmp.path().join("missing"))
        .unwrap_err();
    assert!(missing.to_string().contains("missing"), "{missing}");
    assert_no_temp_files(&root);
}

/// Runs `threads` creators of `path` at once; returns each one's result.
fn race_creators(
    store: &Arc<LocalStore>,
    path: &RelPath,
    content: impl Fn(usize) -> Vec<u8>,
    threads: usize,
) -> Vec<(usize, Result<CreateOutcome, StorageError>)> {
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|id| {
            let (store, path, barrier) = (store.clone(), path.clone(), barrier.clone());
            let data = content(id);
            thread::spawn(move || {
                barrier.wait();
                (id, store.create(&path, &data))
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn concurrent_identical_creators_all_succeed_once_created() {
    let (_tmp, root, store) = setup();
    let store = Arc::new(store);
    let data = random_bytes(200_000);
    for round in 0..10 {
        let path = rel(&format!("objects/r{round}/obj"));
        let results = race_creators(&store, &path, |_| data.clone(), 8);
        let created = results
            .iter()
            .filter(|(_, r)| matches!(r, Ok(CreateOutcome::Created)))
            .count();
        assert_eq!(created, 1, "round {round}: {results:?}");
        for (id, result) in &results {
            assert!(result.is_ok(), "round {round} thread {id}: {result:?}");
        }
        assert_eq!(store.read(&path, None).unwrap(), data);
    }
    assert_no_temp_files(&root);
}

#[test]
fn concurrent_different_creators_exactly_one_wins() {
    let (_tmp, root, store) = setup();
    let store = Arc::new(store);
    for round in 0..10 {
        let path = rel(&format!("r{round}/obj"));
        let content = |id: usize| format!("writer {id} of round {round}").into_bytes();
        let results = race_creators(&store, &path, content, 8);
        let winners: Vec<usize> = results
            .iter()
            .filter(|(_, r)| matches!(r, Ok(CreateOutcome::Created)))
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for (id, result) in &results {
            if *id != winners[0] {
                assert!(
                    matches!(result, Err(StorageError::Collision { .. })),
                    "round {round} thread {id}: {result:?}"
                );
            }
        }
        assert_eq!(store.read(&path, None).unwrap(), content(winners[0]));
    }
    assert_no_temp_files(&root);
}

// ---------------------------------------------------------------------------------------------
// Generations

#[test]
fn generation_pinned_reads() {
    let (_tmp, _root, store) = setup();
    assert!(store.supports_generations());
    let path = rel("obj");
    store.create(&path, b"content").unwrap();
    let generation = store.info(&path, None).unwrap().version.generation.unwrap();

    assert_eq!(
        store.read(&path, Some(generation)).unwrap(),
        &b"content"[..]
    );
    assert_eq!(
        store.read_range(&path, 1..3, Some(generation)).unwrap(),
        &b"on"[..]
    );
    assert_eq!(store.info(&path, Some(generation)).unwrap().size, 7);

    let wrong = generation + 1;
    let check = |result: Result<(), StorageError>| match result {
        Err(StorageError::GenerationMismatch {
            expected, actual, ..
        }) => assert_eq!((expected, actual), (wrong, generation)),
        other => panic!("expected GenerationMismatch, got {other:?}"),
    };
    check(store.read(&path, Some(wrong)).map(drop));
    check(store.read_limited(&path, Some(wrong), 100).map(drop));
    check(store.read_range(&path, 0..1, Some(wrong)).map(drop));
    check(store.info(&path, Some(wrong)).map(drop));
}

#[test]
fn object_reader_reads_positionally_and_pins_the_generation() {
    let (_tmp, _root, store) = setup();
    let store: Arc<dyn ObjectStore> = Arc::new(store);
    let path = rel("annotations/catalog.json");
    let v1 = store.compare_and_swap(&path, b"0123456789", None).unwrap();

    let reader = ObjectReader::open(store.clone(), path.clone(), None).unwrap();
    assert_eq!(reader.size().unwrap(), 10);
    assert_eq!(reader.generation(), v1.generation);
    assert_eq!(reader.read_at(2, 3).unwrap(), &b"234"[..]);
    assert!(reader.read_at(10, 0).unwrap().is_empty());
    let err = reader.read_at(8, 3).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    assert!(reader.read_at(u64::MAX, 2).is_err());

    // Replaced underneath: the pinned reader fails rather than mixing versions.
    store
        .compare_and_swap(&path, b"abcdefghij", Some(&v1))
        .unwrap();
    let err = reader.read_at(0, 1).unwrap_err();
    let inner = err.get_ref().and_then(|e| e.downcast_ref::<StorageError>());
    assert!(
        matches!(inner, Some(StorageError::GenerationMismatch { .. })),
        "{err:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Compare-and-swap

#[test]
fn compare_and_swap_preconditions() {
    let (_tmp, root, store) = setup();
    let path = rel("annotations/catalog.json");
    assert!(store.read_versioned(&path).unwrap().is_none());

    let v1 = store.compare_and_swap(&path, b"one", None).unwrap();
    let (bytes, current) = store.read_versioned(&path).unwrap().unwrap();
    assert_eq!((bytes.as_ref(), &current), (&b"one"[..], &v1));
    assert_eq!(store.info(&path, None).unwrap().version, v1);

    let err = store.compare_and_swap(&path, b"two", None).unwrap_err();
    assert!(
        matches!(err, StorageError::PreconditionFailed { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("catalog.json"), "{err}");

    let v2 = store.compare_and_swap(&path, b"two", Some(&v1)).unwrap();
    assert!(v2.generation.unwrap() > v1.generation.unwrap());

    let stale = store
        .compare_and_swap(&path, b"three", Some(&v1))
        .unwrap_err();
    assert!(
        matches!(stale, StorageError::PreconditionFailed { .. }),
        "{stale}"
    );
    let blind = Version {
        generation: None,
        etag: None,
    };
    let err = store
        .compare_and_swap(&path, b"three", Some(&blind))
        .unwrap_err();
    assert!(
        matches!(err, StorageError::PreconditionFailed { .. }),
        "{err}"
    );

    // A generation alone (as a catalog reference carries) is enough.
    let by_generation = Version {
        generation: v2.generation,
        etag: None,
    };
    let v3 = store
        .compare_and_swap(&path, b"three", Some(&by_generation))
        .unwrap();
    assert!(v3.generation.unwrap() > v2.generation.unwrap());
    assert_eq!(store.read(&path, None).unwrap(), &b"three"[..]);
    assert_eq!(
        store.read(&path, v3.generation).unwrap(),
        &b"three"[..],
        "the returned version is readable by generation"
    );
    assert_no_temp_files(&root);
}

#[test]
fn compare_and_swap_expecting_a_version_of_an_absent_object_fails() {
    let (_tmp, _root, store) = setup();
    let expected = Version {
        generation: Some(1),
        etag: None,
    };
    let err = store
        .compare_and_swap(&rel("c.json"), b"x", Some(&expected))
        .unwrap_err();
    assert!(
        matches!(err, StorageError::PreconditionFailed { .. }),
        "{err}"
    );
    assert!(store.read_versioned(&rel("c.json")).unwrap().is_none());
}

/// Parses the `[1,2,3]` lists the update tests build.
fn parse_list(bytes: &[u8]) -> Vec<u32> {
    let text = std::str::from_utf8(bytes).unwrap();
    let inner = text.strip_prefix('[').unwrap().strip_suffix(']').unwrap();
    if inner.is_empty() {
        return Vec::new();
    }
    inner.split(',').map(|n| n.parse().unwrap()).collect()
}

fn format_list(items: &[u32]) -> Vec<u8> {
    let items: Vec<String> = items.iter().map(u32::to_string).collect();
    format!("[{}]", items.join(",")).into_bytes()
}

/// Appends `id` to the list at `path` by read-modify-CAS, retrying on conflict; returns the
/// list length after this update and the version it produced.
fn append_with_retry(store: &dyn ObjectStore, path: &RelPath, id: u32) -> (usize, u64) {
    loop {
        let (mut items, expected) = match store.read_versioned(path).unwrap() {
            Some((bytes, version)) => (parse_list(&bytes), Some(version)),
            None => (Vec::new(), None),
        };
        items.push(id);
        match store.compare_and_swap(path, &format_list(&items), expected.as_ref()) {
            Ok(version) => return (items.len(), version.generation.unwrap()),
            Err(StorageError::PreconditionFailed { .. }) => continue,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
}

/// No lost update: every id appears `updates` times, and generations rise with the list.
fn check_history(
    store: &dyn ObjectStore,
    path: &RelPath,
    writers: u32,
    updates: usize,
    mut history: Vec<(usize, u64)>,
) {
    let items = parse_list(&store.read(path, None).unwrap());
    assert_eq!(items.len(), writers as usize * updates);
    let mut counts: HashMap<u32, usize> = HashMap::new();
    for id in items {
        *counts.entry(id).or_default() += 1;
    }
    for id in 0..writers {
        assert_eq!(counts.get(&id), Some(&updates), "writer {id}: {counts:?}");
    }
    history.sort();
    let lengths: Vec<usize> = history.iter().map(|(len, _)| *len).collect();
    assert_eq!(
        lengths,
        (1..=writers as usize * updates).collect::<Vec<_>>()
    );
    for pair in history.windows(2) {
        assert!(
            pair[1].1 > pair[0].1,
            "generations must strictly increase: {pair:?}"
        );
    }
}

#[test]
fn concurrent_read_modify_cas_loses_no_update() {
    let (_tmp, root, store) = setup();
    let store: Arc<dyn ObjectStore> = Arc::new(store);
    let path = rel("annotations/catalog.json");
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8u32)
        .map(|id| {
            let (store, path, barrier) = (store.clone(), path.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                (0..20)
                    .map(|_| append_with_retry(store.as_ref(), &path, id))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let history: Vec<(usize, u64)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    check_history(store.as_ref(), &path, 8, 20, history);
    assert_no_temp_files(&root);
}

const CHILD_ROOT: &str = "SDSFS_TEST_CAS_CHILD_ROOT";
const CHILD_ID: &str = "SDSFS_TEST_CAS_CHILD_ID";

/// Body of one child process of `cas_across_processes`; does nothing in a normal test run.
#[test]
fn cas_child_worker() {
    let (Ok(root), Ok(id)) = (std::env::var(CHILD_ROOT), std::env::var(CHILD_ID)) else {
        return;
    };
    let id: u32 = id.parse().unwrap();
    let store = LocalStore::open(Path::new(&root)).unwrap();
    let path = rel("annotations/catalog.json");
    let history: Vec<String> = (0..20)
        .map(|_| {
            let (len, generation) = append_with_retry(&store, &path, id);
            format!("{len} {generation}")
        })
        .collect();
    let report = Path::new(&root)
        .parent()
        .unwrap()
        .join(format!("history-{id}"));
    fs::write(report, history.join("\n")).unwrap();
}

#[test]
fn cas_across_processes() {
    let (tmp, root, store) = setup();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..8)
        .map(|id| {
            std::process::Command::new(&exe)
                .args(["--exact", "cas_child_worker", "--test-threads=1"])
                .env(CHILD_ROOT, &root)
                .env(CHILD_ID, id.to_string())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let mut history = Vec::new();
    for id in 0..8 {
        let text = fs::read_to_string(tmp.path().join(format!("history-{id}"))).unwrap();
        for line in text.lines() {
            let (len, generation) = line.split_once(' ').unwrap();
            history.push((len.parse().unwrap(), generation.parse().unwrap()));
        }
    }
    check_history(&store, &rel("annotations/catalog.json"), 8, 20, history);
    assert_no_temp_files(&root);
}
