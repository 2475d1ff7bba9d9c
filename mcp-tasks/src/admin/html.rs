//! The admin view's HTML: escaping, and the page every view and form answers with.

use axum::{
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};

use super::state::Failure;

/// `text` with the five characters that mean something in HTML escaped.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes a path segment or query value.
pub(super) fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.3em}table{border-collapse:collapse;margin:.8em 0}\
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.t{white-space:nowrap}td.n{text-align:right;font-variant-numeric:tabular-nums}\
.working{color:#05a}.input_required{color:#a60}.completed{color:#080}.failed{color:#c00}\
.cancelled{color:#777}form.filters label{margin-right:.8em}input{width:9em}\
pre{background:#f7f7f7;padding:.5em;white-space:pre-wrap;word-break:break-all}\
button{font-size:1em;padding:.3em 1em}";

pub(super) fn page(status: StatusCode, title: &str, body: &str, refresh: Option<u32>) -> Response {
    let refresh = refresh
        .map(|s| format!("<meta http-equiv=\"refresh\" content=\"{s}\">"))
        .unwrap_or_default();
    let title = escape(title);
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">{refresh}\
         <title>{title} · mcp-tasks admin</title><style>{STYLE}</style></head><body>\
         <h1>{title}</h1>{body}</body></html>"
    );
    let headers = [(header::CONTENT_TYPE, "text/html; charset=utf-8")];
    (status, headers, html).into_response()
}

/// The page of `failure` (with `Retry-After` when throttled).
pub(super) fn error_page(failure: &Failure) -> Response {
    let message = escape(&failure.message());
    let body = format!("<p class=\"error\">{message}</p><p><a href=\"/admin/\">All tasks</a></p>");
    let mut response = page(failure.status(), "Error", &body, None);
    failure.add_retry_after(&mut response);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }
}
