//! `cubenet studio` over HTTP, as a browser and as an attacker would talk to it: the token
//! traded for a cookie, a foreign Host refused (DNS rebinding), a cross-origin POST refused,
//! `..`, encoded `..`, absolute paths and links out of the runs folder not found, the runs
//! and a run's page read from real runs, its live events, and Stop ending a running run at
//! a checkpoint.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cli::cubenet;
use crate::common::{configs, with_mnist_dir};

/// A studio process and the address and token it printed.
pub(crate) struct Studio {
    child: Child,
    /// `127.0.0.1:PORT`.
    address: String,
    token: String,
}

impl Drop for Studio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Studio {
    fn start(runs: &Path) -> Self {
        Self::start_with(
            cubenet()
                .args(["studio", "--port", "0", "--runs"])
                .arg(runs),
        )
    }

    /// Starts `command`, a `cubenet studio`, and reads the address it prints.
    pub(crate) fn start_with(command: &mut Command) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("cubenet studio: open http://")
            .unwrap_or_else(|| panic!("{line}"));
        let (address, token) = url.split_once("/?token=").unwrap();
        Studio {
            address: address.to_string(),
            token: token.to_string(),
            child,
        }
    }

    /// The cookie the token is traded for.
    pub(crate) fn cookie(&self) -> String {
        let response = self.request("GET", &format!("/?token={}", self.token), &[]);
        assert_eq!(response.status, 303, "{}", response.head);
        let set = response.header("set-cookie").unwrap();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
        set.split(';').next().unwrap().to_string()
    }

    /// One request with the studio's own Host and `headers`; the whole response.
    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
        let host = [("Host", self.address.as_str())];
        let mut all: Vec<(&str, &str)> = headers.to_vec();
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("host"))
        {
            all.extend(host);
        }
        raw_request(&self.address, method, path, &all)
    }

    pub(crate) fn get(&self, cookie: &str, path: &str) -> Response {
        self.request("GET", path, &[("Cookie", cookie)])
    }
}

/// An HTTP/1.1 response: status, head and body.
pub(crate) struct Response {
    status: u16,
    head: String,
    pub(crate) body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

/// Sends a request exactly as written (no client normalizes its path or its Host) and reads
/// the response to its end.
fn raw_request(address: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if method == "POST" {
        request.push_str("Content-Length: 0\r\n");
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).unwrap();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap();
    Response {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// A finished image run (the single-conv CNN on 600 MNIST images, 2 epochs) in `dir`.
fn train_image_run(dir: &Path) {
    let mut command = cubenet();
    command
        .args(["train", "--backend", "ndarray", "--config"])
        .arg(configs().join("mnist_cnn.toml"))
        .args(["--epochs", "2", "--set", "data.limit_train=600"])
        .args(["--set", "data.limit_test=200", "--set", "model.filters=4"])
        .arg("--artifact-dir")
        .arg(dir);
    let output = with_mnist_dir(&mut command).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_studio_signs_in_with_its_token_and_refuses_foreign_hosts_and_origins() {
    let runs = tempfile::tempdir().unwrap();
    let studio = Studio::start(runs.path());
    // No cookie, a wrong token: refused.
    assert_eq!(studio.request("GET", "/", &[]).status, 401);
    assert_eq!(studio.request("GET", "/api/runs", &[]).status, 401);
    assert_eq!(studio.request("GET", "/?token=0000", &[]).status, 401);
    let cookie = studio.cookie();
    let page = studio.get(&cookie, "/");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("/assets/app.js"), "{}", page.body);
    let policy = page.header("content-security-policy").unwrap();
    assert!(
        policy.contains("default-src 'none'") && policy.contains("frame-ancestors 'none'"),
        "{policy}"
    );
    assert_eq!(studio.get(&cookie, "/assets/app.js").status, 200);
    // A name that resolves to this address (DNS rebinding), or none: refused, cookie or not.
    let port = studio.address.rsplit(':').next().unwrap();
    for host in [format!("attacker.example:{port}"), String::new()] {
        let response = studio.request("GET", "/api/runs", &[("Host", &host), ("Cookie", &cookie)]);
        assert_eq!(response.status, 421, "Host {host:?}");
    }
    assert_eq!(
        studio
            .request(
                "GET",
                "/api/runs",
                &[("Host", &format!("localhost:{port}")), ("Cookie", &cookie)]
            )
            .status,
        200
    );
    // Changes come by POST from the studio's own pages only.
    let stop = "/api/runs/any/stop";
    let own = format!("http://{}", studio.address);
    for origin in [None, Some("http://attacker.example"), Some("null")] {
        let mut headers = vec![("Cookie", cookie.as_str())];
        headers.extend(origin.map(|o| ("Origin", o)));
        assert_eq!(
            studio.request("POST", stop, &headers).status,
            403,
            "{origin:?}"
        );
    }
    let same_origin = [("Cookie", cookie.as_str()), ("Origin", own.as_str())];
    assert_eq!(studio.request("POST", stop, &same_origin).status, 404);
    assert_eq!(
        studio
            .request("POST", stop, &[("Origin", own.as_str())])
            .status,
        401
    );
    assert_eq!(
        studio.request("DELETE", "/api/runs", &same_origin).status,
        405
    );
}

#[test]
fn the_studio_shows_real_runs_and_nothing_outside_the_runs_folder() {
    let runs = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    train_image_run(&runs.path().join("digits"));
    // Outside the runs folder: a secret, and a real run that a link in the folder points at.
    std::fs::write(outside.path().join("secret.txt"), "the secret").unwrap();
    train_image_run(&outside.path().join("elsewhere"));
    std::os::unix::fs::symlink(outside.path().join("elsewhere"), runs.path().join("link")).unwrap();
    std::fs::create_dir(runs.path().join("plain")).unwrap();
    // A link planted inside a real run, in place of one of its files.
    std::fs::remove_file(runs.path().join("digits/config.json")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        runs.path().join("digits/config.json"),
    )
    .unwrap();

    let studio = Studio::start(runs.path());
    let cookie = studio.cookie();
    let list = studio.get(&cookie, "/api/runs");
    assert_eq!(list.status, 200);
    let runs_json: serde_json::Value = serde_json::from_str(&list.body).unwrap();
    let names: Vec<&str> = runs_json
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["digits"], "{}", list.body);
    let digits = &runs_json[0];
    assert_eq!(digits["status"], "finished");
    assert_eq!(digits["network"], "simple");
    assert_eq!(digits["epochs_done"], 2);
    assert_eq!(digits["epochs"], 2);
    let accuracy = digits["test_accuracy"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&accuracy), "{accuracy}");

    let detail = studio.get(&cookie, "/api/runs/digits");
    assert_eq!(detail.status, 200);
    let detail: serde_json::Value = serde_json::from_str(&detail.body).unwrap();
    assert_eq!(
        detail["curves"]["Loss"]["epochs"]["valid"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(
        !detail["curves"]["Loss"]["iterations"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(detail["per_class"].as_array().unwrap().len(), 10);
    assert_eq!(detail["settings"]["training.epochs"], "2");
    assert_eq!(
        studio
            .get(&cookie, "/api/runs/digits/files/curves.png")
            .status,
        200
    );

    for path in [
        "/api/runs/link",
        "/api/runs/plain",
        "/api/runs/..",
        "/api/runs/%2e%2e",
        "/api/runs/..%2f..%2fetc",
        "/api/runs/%2Fetc/files/run.toml",
        "/api/runs/link/files/run.toml",
        "/api/runs/%2e%2e/files/run.toml",
        "/api/runs/digits/files/..%2f..%2fsecret.txt",
        "/api/runs/digits/files/config.json",
        "/api/runs/digits/files/model.mpk",
        "/../secret.txt",
        "/assets/..%2f..%2fsecret.txt",
    ] {
        let response = studio.get(&cookie, path);
        assert_eq!(response.status, 404, "{path}: {}", response.body);
        assert!(!response.body.contains("the secret"), "{path}");
    }
    // The run's live events: its page, at once.
    let mut stream = TcpStream::connect(&studio.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET /api/runs/digits/events HTTP/1.1\r\nHost: {}\r\nCookie: {cookie}\r\n\r\n",
        studio.address
    )
    .unwrap();
    let mut seen = String::new();
    let mut reader = BufReader::new(stream);
    while !seen.contains("event: run") {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "{seen}");
        seen.push_str(&line);
    }
    assert!(seen.contains("text/event-stream"), "{seen}");
}

#[test]
fn stop_ends_a_running_run_at_a_checkpoint() {
    let runs = tempfile::tempdir().unwrap();
    let dir = runs.path().join("long");
    let mut run = cubenet()
        .args(["train", "--config"])
        .arg(configs().join("linear_regression.toml"))
        .args([
            "--set",
            "data.rows=40000",
            "--batch-size",
            "16",
            "--epochs",
            "200",
        ])
        .arg("--artifact-dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let studio = Studio::start(runs.path());
    let cookie = studio.cookie();
    let start = Instant::now();
    let status = |studio: &Studio| -> serde_json::Value {
        let detail = studio.get(&cookie, "/api/runs/long");
        match detail.status {
            200 => serde_json::from_str::<serde_json::Value>(&detail.body).unwrap()["summary"]
                ["status"]
                .clone(),
            _ => serde_json::Value::Null,
        }
    };
    // Running, with its first epoch's checkpoint written.
    while !(status(&studio) == "running" && dir.join("checkpoint/scheduler-1.mpk").exists()) {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "the run never ran"
        );
        assert!(run.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    let own = format!("http://{}", studio.address);
    let stop = studio.request(
        "POST",
        "/api/runs/long/stop",
        &[("Cookie", &cookie), ("Origin", &own)],
    );
    assert_eq!(stop.status, 202, "{}", stop.body);
    let exit = run.wait().unwrap();
    let mut stderr = String::new();
    run.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(exit.code(), Some(130), "{stderr}");
    assert!(stderr.contains("--resume"), "{stderr}");
    assert_eq!(status(&studio), "stopped");
}
