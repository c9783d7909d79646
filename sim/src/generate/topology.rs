//! What a generated cluster holds: the [`Topology`], its [`Preset`]s, and [`Amount`]s of deletions.

use std::fmt;
use std::str::FromStr;

/// A count, or a share of what there is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Amount {
    /// Exactly this many.
    Count(usize),
    /// This fraction (0 to 1) of the total, rounded.
    Share(f64),
}

impl Amount {
    /// How many of `total` this is.
    pub fn of(self, total: usize) -> usize {
        match self {
            Amount::Count(n) => n,
            Amount::Share(f) => (f * total as f64).round() as usize,
        }
    }
}

impl FromStr for Amount {
    type Err = String;

    /// `25` is a count; `5%` and `0.05` are shares.
    fn from_str(s: &str) -> Result<Amount, String> {
        let share = |f: f64| {
            if (0.0..=1.0).contains(&f) {
                Ok(Amount::Share(f))
            } else {
                Err(format!("{s:?} is not a share between 0 and 100%"))
            }
        };
        let number = |t: &str| {
            t.parse::<f64>()
                .map_err(|_| format!("{s:?} is not a count, a fraction or a percentage"))
        };
        if let Some(percent) = s.strip_suffix('%') {
            share(number(percent)? / 100.0)
        } else if s.contains('.') {
            share(number(s)?)
        } else {
            s.parse()
                .map(Amount::Count)
                .map_err(|_| format!("{s:?} is not a count, a fraction or a percentage"))
        }
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Amount::Count(n) => write!(f, "{n}"),
            Amount::Share(s) => write!(f, "{}%", s * 100.0),
        }
    }
}

/// The shape of a generated cluster and what happens to it. Counts "per namespace" repeat in
/// every namespace; the special cases are totals, spread over the namespaces.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    /// Namespaces (`team-0000`, …).
    pub namespaces: usize,
    /// Deployments per namespace.
    pub deployments: usize,
    /// ReplicaSets per Deployment.
    pub replicasets: usize,
    /// Pods per ReplicaSet.
    pub pods: usize,
    /// Jobs per namespace.
    pub jobs: usize,
    /// Pods per Job.
    pub job_pods: usize,
    /// Custom-resource chains per namespace (`example.com/v1` Widgets, each owning the next).
    pub chains: usize,
    /// Widgets per chain.
    pub chain_depth: usize,
    /// Cluster-scoped owners in all: ClusterRoles owning ClusterRoleBindings, alternating with
    /// cluster-scoped `example.com/v1` Fleets owning ConfigMaps across the namespaces.
    pub cluster_owners: usize,
    /// Dependents per cluster-scoped owner.
    pub cluster_dependents: usize,
    /// ConfigMaps owned by two Deployments of their namespace.
    pub multi_owner: usize,
    /// Pods whose owner is a ReplicaSet UID that never exists.
    pub dangling: usize,
    /// ConfigMaps naming a Deployment of another namespace as owner (an invalid reference).
    pub cross_namespace: usize,
    /// Ownership cycles: two ConfigMaps owning each other, the first also owned by a Deployment.
    pub cycles: usize,
    /// Fraction of Deployment pods listed before their ReplicaSet.
    pub pods_before_owner: f64,
    /// MODIFIED events on Deployment pods: a blockOwnerDeletion flip, a second owner, or a move
    /// to a sibling ReplicaSet.
    pub churn: usize,
    /// Roots (Deployments, Jobs, chain heads, cluster-scoped owners) deleted in the background.
    pub delete_background: Amount,
    /// Roots deleted in the foreground.
    pub delete_foreground: Amount,
    /// Roots deleted with the orphan policy.
    pub delete_orphan: Amount,
}

/// A standard stream size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// About 10k objects.
    Small,
    /// About 1M objects: the standard million-object stream.
    #[value(name = "1m")]
    OneMillion,
    /// About 5M objects.
    #[value(name = "5m")]
    FiveMillion,
}

impl Preset {
    /// The preset's topology: mostly Deployment → ReplicaSet → Pod trees of 23 objects, a
    /// sprinkling of every special case, and 10 % / 5 % / 5 % of the roots deleted in the
    /// background / foreground / with orphaning.
    pub fn topology(self) -> Topology {
        match self {
            Preset::Small => Topology::shape(10, 42, 10),
            Preset::OneMillion => Topology::shape(100, 420, 1000),
            Preset::FiveMillion => Topology::shape(500, 420, 5000),
        }
    }
}

impl Topology {
    /// The presets' shape: `namespaces` of `deployments` each (2 ReplicaSets of 10 Pods), a Job of
    /// 3 Pods per 10 Deployments, 2 Widget chains of 3, and `special` sizing every special case.
    fn shape(namespaces: usize, deployments: usize, special: usize) -> Topology {
        Topology {
            namespaces,
            deployments,
            replicasets: 2,
            pods: 10,
            jobs: deployments / 10,
            job_pods: 3,
            chains: 2,
            chain_depth: 3,
            cluster_owners: 6 * special / 10,
            cluster_dependents: 5,
            multi_owner: 4 * special,
            dangling: 4 * special,
            cross_namespace: 2 * special,
            cycles: 2 * special,
            pods_before_owner: 0.05,
            churn: 20 * special,
            delete_background: Amount::Share(0.10),
            delete_foreground: Amount::Share(0.05),
            delete_orphan: Amount::Share(0.05),
        }
    }

    /// The presets' shape grown or shrunk to about `objects` objects (`kube-gc simulate
    /// --objects`): a namespace per thousand objects (1 to 100), one special case of each kind
    /// per thousand, and as many Deployments per namespace as fill the rest. At 10 000 and
    /// 1 000 000 this is the `small` and `1m` presets within a few objects. Tiny sizes still
    /// get one namespace with its two chains, so the result is never empty.
    pub fn sized(objects: usize) -> Topology {
        let namespaces = (objects / 1000).clamp(1, 100);
        let special = objects / 1000;
        let base = Topology::shape(namespaces, 0, special);
        // What each Deployment brings: its tree, plus a tenth of a Job tree.
        let per_deployment = 1.0 + (base.replicasets * (1 + base.pods)) as f64 + (1 + base.job_pods) as f64 / 10.0;
        let fill = objects.saturating_sub(base.objects()) as f64 / namespaces as f64;
        Topology::shape(namespaces, (fill / per_deployment).round() as usize, special)
    }

    /// The same shapes with nothing for a collector to do: no special case that is garbage from
    /// the start (dangling and cross-namespace references), no churn and no deletions. This is
    /// the cluster `kube-gc sim-apiserver --preset` serves, where every object should stay until
    /// a client deletes something.
    pub fn settled(self) -> Topology {
        Topology {
            dangling: 0,
            cross_namespace: 0,
            churn: 0,
            delete_background: Amount::Count(0),
            delete_foreground: Amount::Count(0),
            delete_orphan: Amount::Count(0),
            ..self
        }
    }

    /// The name of namespace `i` (`team-0000`, …); every namespaced object lives in one of
    /// `0..namespaces`.
    pub fn namespace(i: usize) -> String {
        format!("team-{i:04}")
    }

    /// Roots that deletions pick from, in generation order: per namespace its Deployments, Jobs
    /// and chain heads, then the cluster-scoped owners.
    pub fn roots(&self) -> usize {
        self.namespaces * (self.deployments + self.jobs + self.chains) + self.cluster_owners
    }

    /// Pods of Deployments, the ones churn picks from.
    pub fn deployment_pods(&self) -> usize {
        self.namespaces * self.deployments * self.replicasets * self.pods
    }

    /// Objects the stream creates when every special case fits (saturating, for absurd flags).
    pub fn objects(&self) -> usize {
        let mul = usize::saturating_mul;
        let per_namespace = mul(self.deployments, 1 + mul(self.replicasets, 1 + self.pods))
            .saturating_add(mul(self.jobs, 1 + self.job_pods))
            .saturating_add(mul(self.chains, self.chain_depth));
        [
            mul(self.namespaces, per_namespace),
            mul(self.cluster_owners, 1 + self.cluster_dependents),
            self.multi_owner,
            self.dangling,
            self.cross_namespace,
            mul(2, self.cycles),
        ]
        .into_iter()
        .fold(0, usize::saturating_add)
    }

    /// Rejects what cannot be generated, with the reason.
    pub fn check(&self) -> Result<(), String> {
        if self.objects() > MAX_OBJECTS {
            return Err(format!(
                "the topology makes {} objects; at most {MAX_OBJECTS} are supported",
                self.objects()
            ));
        }
        if !(0.0..=1.0).contains(&self.pods_before_owner) {
            return Err(format!(
                "--pods-before-owner {} is not a fraction between 0 and 1",
                self.pods_before_owner
            ));
        }
        if self.chains > 0 && self.chain_depth == 0 {
            return Err("--chain-depth must be at least 1 when there are chains".into());
        }
        let roots = self.roots();
        let deleted: usize = [self.delete_background, self.delete_foreground, self.delete_orphan]
            .iter()
            .map(|a| a.of(roots))
            .sum();
        if deleted > roots {
            return Err(format!(
                "the deletions ask for {deleted} roots, but the topology has {roots}"
            ));
        }
        if self.churn > self.deployment_pods() {
            return Err(format!(
                "--churn {} is more than the {} Deployment pods",
                self.churn,
                self.deployment_pods()
            ));
        }
        Ok(())
    }
}

/// The largest stream [`generate`](super::generate) makes: far beyond the 5M preset, and still a stream that a
/// machine can write.
const MAX_OBJECTS: usize = 1_000_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amount_should_read_counts_fractions_and_percentages() {
        assert_eq!("25".parse(), Ok(Amount::Count(25)));
        assert_eq!("0.5".parse(), Ok(Amount::Share(0.5)));
        assert_eq!("5%".parse(), Ok(Amount::Share(0.05)));
        assert!("150%".parse::<Amount>().is_err());
        assert!("lots".parse::<Amount>().is_err());
        assert_eq!(Amount::Share(0.05).of(490), 25);
    }

    #[test]
    fn check_should_reject_more_deletions_than_roots() {
        let t = Topology {
            delete_background: Amount::Share(0.8),
            delete_orphan: Amount::Share(0.5),
            ..Preset::Small.topology()
        };
        let err = t.check().expect_err("too many deletions");
        assert!(err.contains("but the topology has 486"), "{err}");
        assert_eq!(Preset::Small.topology().check(), Ok(()));
    }

    #[test]
    fn presets_should_be_about_their_size() {
        for (preset, size) in [
            (Preset::Small, 10_000),
            (Preset::OneMillion, 1_000_000),
            (Preset::FiveMillion, 5_000_000),
        ] {
            let objects = preset.topology().objects();
            assert!(objects.abs_diff(size) * 50 < size, "{preset:?}: {objects} objects");
        }
    }

    #[test]
    fn sized_should_be_about_its_size_and_the_presets_at_theirs() {
        for size in [1, 500, 3000, 20_000, 1_000_000, 5_000_000] {
            let objects = Topology::sized(size).objects();
            assert!(
                objects.abs_diff(size) * 50 <= size.max(300),
                "{size}: {objects} objects"
            );
            assert_eq!(Topology::sized(size).check(), Ok(()));
        }
        let small = Topology::sized(10_000);
        assert_eq!(
            (small.namespaces, small.deployments, small.dangling),
            (10, 42, 40),
            "the small preset's shape"
        );
        assert_eq!(Topology::sized(1_000_000), Preset::OneMillion.topology());
    }

    #[test]
    fn settled_should_keep_the_trees_and_drop_the_garbage() {
        let t = Preset::Small.topology().settled();
        assert_eq!((t.dangling, t.cross_namespace, t.churn), (0, 0, 0));
        assert_eq!(t.deployments, Preset::Small.topology().deployments);
        assert_eq!(t.check(), Ok(()));
    }
}
