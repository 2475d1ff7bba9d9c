//! The example HTTP server's command line (issue 32): `--help` lists every flag with its
//! environment variable, and `--admin-bind` serves the admin API (behind
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
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    for (flag, var) in [
        ("--bind", "MCP_TASKS_BIND"),
        ("--store", "MCP_TASKS_STORE"),
        ("--admin-bind", "MCP_TASKS_ADMIN_BIND"),
    ] {
        assert!(
            text.lines().any(|l| l.contains(flag) && l.contains(var)),
            "{flag} {var}: {text}"
        );
    }
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
