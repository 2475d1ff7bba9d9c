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

/// Adding task tools to an existing rmcp server.
///
#[cfg_attr(feature = "http", doc = page_links!())]
#[cfg_attr(feature = "http", doc = include_str!("../guide/01-rmcp-server.md"))]
#[cfg_attr(
    not(feature = "http"),
    doc = "\n\nThis page's examples need feature `http`: build the docs with `--features http`."
)]
pub mod rmcp_server {}

/// Tool modes and restart policies.
///
#[cfg_attr(feature = "sqlite", doc = page_links!())]
#[cfg_attr(feature = "sqlite", doc = include_str!("../guide/02-modes.md"))]
#[cfg_attr(
    not(feature = "sqlite"),
    doc = "\n\nThis page's examples need feature `sqlite`: build the docs with `--features sqlite`."
)]
pub mod modes {}

/// Durable steps and questions.
///
#[cfg_attr(feature = "sqlite", doc = page_links!())]
#[cfg_attr(feature = "sqlite", doc = include_str!("../guide/03-steps-and-questions.md"))]
#[cfg_attr(
    not(feature = "sqlite"),
    doc = "\n\nThis page's examples need feature `sqlite`: build the docs with `--features sqlite`."
)]
pub mod steps_and_questions {}

/// The client and the command line.
///
#[cfg_attr(feature = "client", doc = page_links!())]
#[cfg_attr(feature = "client", doc = include_str!("../guide/04-client-and-cli.md"))]
#[cfg_attr(
    not(feature = "client"),
    doc = "\n\nThis page's examples need feature `client`: build the docs with `--features client`."
)]
pub mod client_and_cli {}

/// Running several instances.
///
#[cfg_attr(all(feature = "postgres", feature = "http"), doc = page_links!())]
#[cfg_attr(
    all(feature = "postgres", feature = "http"),
    doc = include_str!("../guide/05-several-instances.md")
)]
#[cfg_attr(
    not(all(feature = "postgres", feature = "http")),
    doc = "\n\nThis page's examples need features `postgres` and `http`: build the docs with \
           `--features postgres,http`."
)]
pub mod several_instances {}

/// Security.
///
#[cfg_attr(feature = "http", doc = page_links!())]
#[cfg_attr(feature = "http", doc = include_str!("../guide/06-security.md"))]
#[cfg_attr(
    not(feature = "http"),
    doc = "\n\nThis page's examples need feature `http`: build the docs with `--features http`."
)]
pub mod security {}

/// Operating.
///
#[cfg_attr(
    all(feature = "sqlite", feature = "admin", feature = "prometheus"),
    doc = page_links!()
)]
#[cfg_attr(
    all(feature = "sqlite", feature = "admin", feature = "prometheus"),
    doc = include_str!("../guide/07-operating.md")
)]
#[cfg_attr(
    not(all(feature = "sqlite", feature = "admin", feature = "prometheus")),
    doc = "\n\nThis page's examples need features `sqlite`, `admin` and `prometheus`: build \
           the docs with `--features sqlite,admin,prometheus`."
)]
pub mod operating {}

/// Troubleshooting.
///
#[doc = page_links!()]
#[doc = include_str!("../guide/08-troubleshooting.md")]
pub mod troubleshooting {}

/// Changing a tool while tasks run.
///
#[doc = page_links!()]
#[doc = include_str!("../guide/09-changing-tools.md")]
pub mod changing_tools {}

/// Sharing a server between many callers.
///
#[doc = page_links!()]
#[doc = include_str!("../guide/10-many-callers.md")]
pub mod many_callers {}
