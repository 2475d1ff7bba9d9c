//! The user guide: one page per module, from `docs/guide/` in the repository.
//!
//! 1. [Adding task tools to an existing rmcp server](rmcp_server), and the one trap: build
//!    the `Engine` once
//! 2. [Tool modes and restart policies](modes)
//! 3. [Durable steps and questions](steps_and_questions)
//! 4. [The client and the command line](client_and_cli)
//! 5. [Running several instances](several_instances)
//! 6. [Security](security)
//! 7. [Operating](operating)
//! 8. [Troubleshooting](troubleshooting)
//! 9. [Changing a tool while tasks run](changing_tools)
//! 10. [Sharing a server between many callers](many_callers)
//!
//! Every code block of the guide is compiled by `cargo test --doc` with the features its page
//! needs; a page whose features are off says which to turn on. `scripts/fresh_project.sh`
//! builds each one again in a project outside the repository, warnings denied.
//!
//! The modules are empty: they only carry the pages.

// The pages link to each other with Markdown reference links (`[modes]`) whose definitions
// at the end of each file are relative file links, for reading on GitHub. Rustdoc takes the
// first definition of a label, so these, written before each page, win in the rendered docs.
macro_rules! page_links {
    () => {
        "[guide]: crate::guide\n\
         [rmcp-server]: crate::guide::rmcp_server\n\
         [modes]: crate::guide::modes\n\
         [steps-and-questions]: crate::guide::steps_and_questions\n\
         [client-and-cli]: crate::guide::client_and_cli\n\
         [several-instances]: crate::guide::several_instances\n\
         [security]: crate::guide::security\n\
         [operating]: crate::guide::operating\n\
         [troubleshooting]: crate::guide::troubleshooting\n\
         [changing-tools]: crate::guide::changing_tools\n\
         [many-callers]: crate::guide::many_callers\n\n"
    };
}

/// A page of the guide: module `$name`, titled `$title`, its text `guide/$file`. A page whose
/// examples need features is included only with them (`$cfg`); without them it says which
/// (`$needs`) and how to turn them on (`$flags`).
macro_rules! page {
    ($name:ident, $file:literal, $title:literal) => {
        page!($name, $file, $title, all(), "", "");
    };
    ($name:ident, $file:literal, $title:literal, $cfg:meta, $needs:literal, $flags:literal) => {
        #[doc = $title]
        #[doc = ""]
        #[cfg_attr($cfg, doc = page_links!())]
        #[cfg_attr($cfg, doc = include_str!(concat!("../guide/", $file)))]
        #[cfg_attr(
            not($cfg),
            doc = concat!(
                "\n\nThis page's examples need ", $needs, ": build the docs with `--features ",
                $flags, "`."
            )
        )]
        pub mod $name {}
    };
}

page! {
    rmcp_server, "01-rmcp-server.md", "Adding task tools to an existing rmcp server.",
    feature = "http", "feature `http`", "http"
}
page! {
    modes, "02-modes.md", "Tool modes and restart policies.",
    feature = "sqlite", "feature `sqlite`", "sqlite"
}
page! {
    steps_and_questions, "03-steps-and-questions.md", "Durable steps and questions.",
    feature = "sqlite", "feature `sqlite`", "sqlite"
}
page! {
    client_and_cli, "04-client-and-cli.md", "The client and the command line.",
    feature = "client", "feature `client`", "client"
}
page! {
    several_instances, "05-several-instances.md", "Running several instances.",
    all(feature = "postgres", feature = "http"), "features `postgres` and `http`", "postgres,http"
}
page! {
    security, "06-security.md", "Security.",
    feature = "http", "feature `http`", "http"
}
page! {
    operating, "07-operating.md", "Operating.",
    all(feature = "sqlite", feature = "admin", feature = "prometheus"),
    "features `sqlite`, `admin` and `prometheus`", "sqlite,admin,prometheus"
}
page! { troubleshooting, "08-troubleshooting.md", "Troubleshooting." }
page! { changing_tools, "09-changing-tools.md", "Changing a tool while tasks run." }
page! { many_callers, "10-many-callers.md", "Sharing a server between many callers." }
