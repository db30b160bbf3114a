//! S3 on loopback for tests: a `moto_server` child per test ([`Moto`]) and, in front of it when
//! a test wants faults, the fault-injecting proxy `tests/python/fault_proxy.py`
//! ([`FaultProxy`]). Both are killed in guards.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sdsfs::storage::{CloudOptions, CloudStore, RetryPolicy};

/// A minimal HTTP/1.1 request to `127.0.0.1:port`: status and body, or `None` when nothing
/// answers.
pub fn http(port: u16, method: &str, path: &str, body: &[u8]) -> Option<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(body).ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let split = response.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, response[split + 4..].to_vec()))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

/// A `moto_server` child process, killed on drop.
pub struct Moto {
    child: Child,
    pub port: u16,
}

impl Moto {
    pub fn start() -> Moto {
        let exe = super::repo_root().join(".venv/bin/moto_server");
        assert!(
            exe.exists(),
            "{} missing: run scripts/setup-test-env",
            exe.display()
        );
        let port = free_port();
        let child = Command::new(exe)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn moto_server");
        let moto = Moto { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while http(port, "GET", "/", b"").is_none() {
            assert!(
                Instant::now() < deadline,
                "moto_server not ready after 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        moto
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn bucket(&self, name: &str) {
        let status = http(self.port, "PUT", &format!("/{name}"), b"").map(|r| r.0);
        assert_eq!(status, Some(200));
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Options reaching `endpoint` with moto's test credentials and a short retry policy.
pub fn options(endpoint: &str, retry: RetryPolicy) -> CloudOptions {
    CloudOptions {
        retry,
        endpoint: Some(endpoint.to_string()),
        region: Some("us-east-1".into()),
        allow_http: Some(true),
        access_key_id: Some("test".into()),
        secret_access_key: Some("test".into()),
        ..CloudOptions::default()
    }
}

/// A short policy for tests: `attempts` tries, 10 ms base, 80 ms cap.
pub fn short_retry(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        attempts,
        base: Duration::from_millis(10),
        cap: Duration::from_millis(80),
    }
}

pub fn store(endpoint: &str, url: &str, retry: RetryPolicy) -> CloudStore {
    CloudStore::open(url, &options(endpoint, retry)).unwrap()
}

/// The environment `sds` and `sdsfs` need to reach `endpoint`, with retries of `attempts`
/// tries from a 10 ms base.
pub fn env(endpoint: &str, attempts: u32) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", endpoint.to_string()),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("SDS_RETRY_ATTEMPTS", attempts.to_string()),
        ("SDS_RETRY_BASE_MS", "10".into()),
        ("SDS_RETRY_CAP_MS", "80".into()),
    ]
}

/// `tests/python/fault_proxy.py` in front of an S3 server, killed on drop.
pub struct FaultProxy {
    child: Child,
    pub port: u16,
}

impl FaultProxy {
    /// Starts the proxy in front of `upstream` with no faults configured.
    pub fn start(upstream: &str) -> FaultProxy {
        let script = super::repo_root().join("tests/python/fault_proxy.py");
        let mut child = Command::new(super::python())
            .arg(script)
            .args(["--upstream", upstream, "--rate", "0", "--seed", "7"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn fault_proxy.py");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("proxy stdout");
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("fault_proxy.py printed {line:?}, not a port"));
        FaultProxy { child, port }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Applies a JSON configuration (`rate`, `modes`, `delay_ms`, `latency_ms`,
    /// `path_contains`).
    pub fn configure(&self, config: serde_json::Value) {
        let body = config.to_string();
        let response = http(self.port, "POST", "/__proxy/config", body.as_bytes());
        assert_eq!(response.map(|r| r.0), Some(200), "configure {body}");
    }

    /// Injects faults into a share `rate` of requests, drawn from `modes`.
    pub fn faults(&self, rate: f64, modes: &[&str]) {
        self.configure(serde_json::json!({ "rate": rate, "modes": modes }));
    }

    /// Counters (and with `log`, every request seen).
    pub fn stats(&self, log: bool) -> serde_json::Value {
        let path = if log {
            "/__proxy/stats?log=1"
        } else {
            "/__proxy/stats"
        };
        let (status, body) = http(self.port, "GET", path, b"").expect("proxy stats");
        assert_eq!(status, 200);
        serde_json::from_slice(&body).unwrap()
    }

    /// Faults injected so far (delays not counted).
    pub fn faults_injected(&self) -> u64 {
        self.stats(false)["faults"].as_u64().unwrap()
    }

    pub fn reset(&self) {
        assert_eq!(
            http(self.port, "POST", "/__proxy/reset", b"").map(|r| r.0),
            Some(200)
        );
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Uploads every file below `root` (create-only) under the store's prefix.
pub fn upload_tree(store: &dyn sdsfs::storage::ObjectStore, root: &std::path::Path) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let relative = sdsfs::format::path::RelPath::new(&relative).unwrap();
                store.create_from_file(&relative, &path).unwrap();
            }
        }
    }
}

/// Every file (content) and symbolic link (target) below `root`, by relative path.
pub fn walk(root: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if meta.is_dir() {
                stack.push(path);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(
                    format!("{relative} ->"),
                    target.to_string_lossy().into_owned().into_bytes(),
                );
            } else {
                let content =
                    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {relative}: {e}"));
                assert_eq!(meta.len(), content.len() as u64, "{relative}");
                out.insert(relative, content);
            }
        }
    }
    out
}

/// The keys under `prefix` in `bucket`, listed from the server directly (tests only: the
/// library never lists).
pub fn list_keys(port: u16, bucket: &str, prefix: &str) -> Vec<String> {
    let (status, body) = http(port, "GET", &format!("/{bucket}?prefix={prefix}"), b"").unwrap();
    assert_eq!(status, 200);
    let text = String::from_utf8_lossy(&body);
    text.split("<Key>")
        .skip(1)
        .filter_map(|rest| rest.split_once("</Key>").map(|(key, _)| key.to_string()))
        .collect()
}
