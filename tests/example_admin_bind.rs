//! The example HTTP server's command line (issue 32, a `clap` parser): `--help` lists every
//! flag with its environment variable, usage mistakes (in flags or in the environment) get
//! clap's usage error and exit code 2, the environment sets what no flag does, and `--admin-bind` serves the admin API (behind
//! `MCP_TASKS_ADMIN_TOKEN`) and the Prometheus page on a listener apart from MCP's.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tasks-example-http");
const TOKEN: &str = "0123456789abcdef-admin";

#[test]
fn help_lists_every_flag_with_its_variable() {
    let output = Command::new(BIN).arg("--help").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8_lossy(&output.stdout);
    let flags: Vec<&str> = text
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("--"))
        .collect();
    assert!(flags.len() >= 20, "{text}");
    // One line per flag, naming the variable that sets it when the flag is not given.
    for line in flags {
        let flag = line.split([' ', '<']).next().unwrap();
        if flag == "--help" || flag == "--version" {
            continue;
        }
        let var = format!(
            "[env: MCP_TASKS_{}",
            flag[2..].replace('-', "_").to_uppercase()
        );
        assert!(line.contains(&var), "{flag} lacks {var}: {line}");
    }
    assert!(text.contains("MCP_TASKS_ADMIN_TOKEN"), "{text}");
    // The README's settings table and the operating guide name every variable.
    for var in text
        .split("[env: ")
        .skip(1)
        .filter_map(|rest| rest.split(['=', ']']).next())
    {
        for (doc, page) in [
            ("README.md", include_str!("../README.md")),
            (
                "the operating guide",
                include_str!("../docs/guide/07-operating.md"),
            ),
        ] {
            assert!(page.contains(&format!("`{var}")), "{doc} lacks {var}");
        }
    }
}

/// Runs the example with `args` and `env` until it exits; its code and stderr.
fn run(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let output = Command::new(BIN)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn usage_mistakes_get_clap_usage_errors_and_exit_2() {
    for (args, env, says) in [
        (&["--bogus"][..], &[][..], "unexpected argument '--bogus'"),
        (
            &["--port", "eighty"],
            &[],
            "invalid value 'eighty' for '--port <N>'",
        ),
        (
            &["--store", "redis://x"],
            &[],
            "use `memory`, `sqlite:PATH` or `postgres://",
        ),
        (
            &["--request-state-key", "short"],
            &[],
            "invalid value 'short' for '--request-state-key <SECRET>'",
        ),
        (
            &["--schema", "s"],
            &[],
            "--schema is for an instance on a shared store",
        ),
        // The environment is read: its mistakes are usage errors too.
        (
            &[],
            &[("MCP_TASKS_PORT", "eighty")],
            "invalid value 'eighty' for '--port <N>'",
        ),
        (
            &[],
            &[("MCP_TASKS_WORKER", "yes")],
            "--worker is for an instance on a shared store",
        ),
        (
            &["--store", "postgres://u@127.0.0.1:1/db"],
            &[],
            "needs the request-state key every instance shares",
        ),
        (
            &["--admin-bind", "127.0.0.1:0"],
            &[],
            "--admin-bind needs the admin credential in MCP_TASKS_ADMIN_TOKEN",
        ),
    ] {
        let (code, stderr) = run(args, env);
        assert_eq!(code, Some(2), "{args:?} {env:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?} {env:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?} {env:?}: {stderr}");
        assert!(
            stderr.contains("For more information, try '--help'."),
            "{args:?} {env:?}: {stderr}"
        );
        // Display text, not a Debug dump.
        assert!(!stderr.contains("kind:"), "{args:?} {env:?}: {stderr}");
    }
}

/// Starts the example and reads stderr up to the MCP address it serves on.
fn serving(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut child = Command::new(BIN)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let Some(Ok(line)) = lines.next() else {
            let _ = child.kill();
            panic!(
                "{args:?} {env:?}: exited without serving: {:?}",
                child.wait()
            );
        };
        if let Some(url) = line.strip_prefix("serving MCP on ") {
            break url.to_owned();
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    url
}

#[test]
fn an_anonymous_bind_beyond_loopback_needs_the_explicit_flag() {
    let (code, stderr) = run(&["--bind", "0.0.0.0:0"], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    for says in ["not a loopback address", "--tokens", "--allow-anonymous"] {
        assert!(stderr.contains(says), "says `{says}`: {stderr}");
    }
    let url = serving(&["--bind", "0.0.0.0:0", "--allow-anonymous"], &[]);
    assert!(url.starts_with("http://0.0.0.0:"), "{url}");
    let url = serving(
        &[],
        &[
            ("MCP_TASKS_BIND", "0.0.0.0:0"),
            ("MCP_TASKS_ALLOW_ANONYMOUS", "1"),
        ],
    );
    assert!(url.starts_with("http://0.0.0.0:"), "{url}");
    let url = serving(
        &["--bind", "0.0.0.0:0"],
        &[("MCP_TASKS_TOKENS", "alice:TOKEN_ALICE_0123")],
    );
    assert!(url.starts_with("http://0.0.0.0:"), "{url}");
}

#[test]
fn the_environment_sets_what_a_flag_does_not() {
    // The default is 127.0.0.1:8080: a free port proves the variable was read.
    let url = serving(&[], &[("MCP_TASKS_BIND", "127.0.0.1:0")]);
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(!url.starts_with("http://127.0.0.1:8080/"), "{url}");
    // A flag wins over its variable (which is then not even parsed).
    let url = serving(&["--port", "0"], &[("MCP_TASKS_PORT", "eighty")]);
    assert!(!url.starts_with("http://127.0.0.1:8080/"), "{url}");
}

#[tokio::test]
async fn admin_bind_serves_the_admin_api_and_metrics_apart() {
    let mut child = Command::new(BIN)
        .args(["--port", "0"])
        .env("MCP_TASKS_ADMIN_BIND", "127.0.0.1:0")
        .env("MCP_TASKS_ADMIN_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let (mut admin, mut mcp) = (None, None);
    while admin.is_none() || mcp.is_none() {
        let line = lines
            .next()
            .expect("the server prints its addresses")
            .unwrap();
        if let Some(rest) = line.strip_prefix("serving the admin view on ") {
            admin = rest
                .split(' ')
                .next()
                .map(|u| u.trim_end_matches("/admin").to_owned());
        }
        if let Some(url) = line.strip_prefix("serving MCP on ") {
            mcp = Some(url.to_owned());
        }
    }
    let (admin, mcp) = (admin.unwrap(), mcp.unwrap());
    assert_ne!(admin, mcp.trim_end_matches("/mcp"), "two listeners");

    let http = reqwest::Client::new();
    let page = http.get(format!("{admin}/metrics")).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let page = page.text().await.unwrap();
    assert!(
        page.contains(r#"mcp_tasks_tasks_created_total{tool="workspace_report"} 0"#),
        "{page}"
    );
    let refused = http
        .get(format!("{admin}/admin/api/counts"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    let counts = http
        .get(format!("{admin}/admin/api/counts"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(counts.status().as_u16(), 200);
    // Not on the MCP listener.
    let elsewhere = http
        .get(format!("{}/metrics", mcp.trim_end_matches("/mcp")))
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status().as_u16(), 404);
    let _ = child.kill();
    let _ = child.wait();
}
