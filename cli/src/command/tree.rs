//! `kube-gc tree KIND/NAME [-n NAMESPACE]`: an object's owners above it and its dependents below
//! it, with their deletion states and, when a collector answers, its reasons ([`kube_gc_cli::tree`]).
//!
//! The cluster is the one a kubeconfig names, found as `kube-gc run` finds it (`--kubeconfig`,
//! else `$KUBECONFIG` or `~/.kube/config`, then in-cluster); the namespace defaults to the
//! kubeconfig context's. As the kubectl plugin `kubectl gc tree`, kubectl passes no
//! `--kubeconfig`, only its environment, so `$KUBECONFIG` is what counts there.

use anyhow::Context;
use kube_gc_cli::tree::{self, fetch, CollectorClient, View};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct TreeArgs {
    #[command(flatten)]
    object: ObjectArgs,
}

/// The object a subcommand is about, and where to find it: `kube-gc tree` and `kube-gc plan`.
#[derive(clap::Args)]
pub struct ObjectArgs {
    /// The object: KIND/NAME, or KIND then NAME. KIND is a kind, a resource, a short name or a
    /// plural, optionally with its group (`deployment`, `deploy`, `deployments.apps`, `rc`).
    #[arg(value_name = "KIND/NAME")]
    object: String,
    /// The object's name, when KIND is given alone.
    #[arg(value_name = "NAME")]
    name: Option<String>,
    /// Namespace of the object; default: the kubeconfig context's, else `default`.
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// Kubeconfig of the cluster; default: `$KUBECONFIG`, `~/.kube/config`, then in-cluster.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The collector's plain loopback endpoints (`kube-gc run --insecure-bind-address`).
    #[arg(long, default_value = "http://127.0.0.1:10258", value_name = "URL")]
    pub collector: CollectorClient,
}

/// The object found, and what was read to find it.
pub struct Found {
    /// The client it was read through.
    pub client: kube::Client,
    /// Discovery's resources.
    pub catalogue: tree::Catalogue,
    /// The namespace asked for (the kubeconfig's when none was).
    pub namespace: String,
    /// Where its dependents can be: its namespace, or every namespace (empty) for a
    /// cluster-scoped object.
    pub scope: String,
    /// The object.
    pub target: tree::Object,
}

impl ObjectArgs {
    /// KIND and NAME, from `KIND/NAME` or from two arguments.
    fn kind_and_name(&self) -> anyhow::Result<(&str, &str)> {
        let (kind, name) = match (&self.name, self.object.split_once('/')) {
            (None, Some((kind, name))) => (kind, name),
            (Some(name), None) => (self.object.as_str(), name.as_str()),
            (Some(_), Some(_)) => anyhow::bail!("give the object as KIND/NAME or as KIND NAME, not both"),
            (None, None) => anyhow::bail!("{:?} names no object: expected KIND/NAME", self.object),
        };
        if kind.is_empty() || name.is_empty() || name.contains('/') {
            anyhow::bail!("{:?} names no object: expected KIND/NAME", self.object);
        }
        Ok((kind, name))
    }

    /// KIND alone, as a label selector's plan takes it (`kube-gc plan deployments -l app=web`).
    pub fn kind_alone(&self) -> anyhow::Result<&str> {
        if self.name.is_some() || self.object.contains('/') || self.object.is_empty() {
            anyhow::bail!("with a label selector, give the kind alone (e.g. `deployments -l app=web`), not an object");
        }
        Ok(&self.object)
    }

    /// Connects as `agent` and reads discovery: the client, the catalogue and the namespace asked
    /// for (the kubeconfig's when none was).
    pub async fn connect(&self, agent: &str) -> anyhow::Result<(kube::Client, tree::Catalogue, String)> {
        let agent = format!("{agent}/{}", env!("CARGO_PKG_VERSION"));
        let client = kube_gc::api::connect(self.kubeconfig.as_deref(), &agent).await?;
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        let catalogue = fetch::discover(&client).await?;
        Ok((client, catalogue, namespace))
    }

    /// Connects as `agent`, reads discovery and the object.
    pub async fn find(&self, agent: &str) -> anyhow::Result<Found> {
        let (kind, name) = self.kind_and_name()?;
        let (client, catalogue, namespace) = self.connect(agent).await?;
        let resource = catalogue.resolve(kind)?;
        let target = fetch::get(&client, resource, &namespace, name)
            .await?
            .ok_or_else(|| tree::Error::NotFound {
                resource: resource.qualified(),
                name: name.to_string(),
                namespace: if resource.namespaced {
                    namespace.clone()
                } else {
                    String::new()
                },
            })?;
        // A cluster-scoped object's dependents can be in any namespace.
        let scope = if resource.namespaced {
            namespace.clone()
        } else {
            String::new()
        };
        Ok(Found {
            client,
            catalogue,
            namespace,
            scope,
            target,
        })
    }
}

pub async fn run(args: TreeArgs) -> anyhow::Result<()> {
    let Found {
        client,
        catalogue,
        namespace,
        scope,
        target,
    } = args.object.find("kube-gc-tree").await?;
    let fetched = fetch::fetch(&client, &catalogue, &scope, std::slice::from_ref(&target)).await?;
    for (resource, why) in &fetched.unlisted {
        eprintln!("note: {resource} could not be listed, so its objects are left out: {why}");
    }
    let collector = &args.object.collector;
    let why = match collector.reasons(&fetched.listing, &target.uid).await {
        Ok(why) => Some(why),
        Err(e) => {
            eprintln!("note: no collector at {collector} ({e}); the WHY column is left out");
            None
        }
    };
    let text = tree::render(&View {
        listing: &fetched.listing,
        target: &target.uid,
        namespace: &namespace,
        now: k8s_openapi::jiff::Timestamp::now(),
        why: why.as_ref(),
    });
    print(&text)
}

/// Writes `text` to stdout; a reader that stopped early (`| head`) is no failure.
pub(super) fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => written.context("writing the tree"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Cli, Command};
    use clap::Parser;

    /// KIND and NAME as `kube-gc tree ARGS` reads them, or the message refusing them.
    fn kind_and_name(args: &[&str]) -> Result<(String, String), String> {
        let cli = Cli::try_parse_from(["kube-gc", "tree"].iter().chain(args)).map_err(|e| e.to_string())?;
        let Command::Tree(tree) = cli.command else {
            panic!("not the tree subcommand");
        };
        let (kind, name) = tree.object.kind_and_name().map_err(|e| e.to_string())?;
        Ok((kind.to_string(), name.to_string()))
    }

    #[test]
    fn the_object_should_be_kind_slash_name_or_kind_then_name() {
        let web = Ok(("deploy".to_string(), "web".to_string()));
        assert_eq!(kind_and_name(&["deploy/web"]), web);
        assert_eq!(kind_and_name(&["deploy", "web", "-n", "shop"]), web);
        for bad in [
            &["deploy"][..],
            &["deploy/"],
            &["/web"],
            &["deploy/web/x"],
            &["deploy/web", "web"],
        ] {
            let refused = kind_and_name(bad).expect_err("refused");
            assert!(
                refused.contains("KIND/NAME") || refused.contains("KIND NAME"),
                "{bad:?}: {refused}"
            );
        }
    }

    #[test]
    fn a_collector_that_is_not_plain_http_should_be_refused() {
        let refused = kind_and_name(&["deploy/web", "--collector", "https://127.0.0.1:10257"]).expect_err("refused");
        assert!(refused.contains("is not a collector address"), "{refused}");
    }
}
