//! The oracle of `replay --mode full` is kube-gc's reference model, [`kube_gc_sim::model`], the one the
//! differential tests check the engine against; this module only converts a script's objects and
//! actions into the model's.
//!
//! The model serves the types the simulated cluster's discovery document lists, the stream's
//! custom types included, and settles in one order ([`Model::settle_in_one_order`]), which scales
//! to millions of objects; [`super::full`] checks that the order does not matter by settling both
//! after every action and after the last.

use super::script::Action;
use kube_gc::api::{ApiResource, PartialObjectMeta};
use kube_gc_sim::model::{self, Kind, Model, Outcome};

/// An empty cluster serving what `resources` list.
pub fn model(resources: &[ApiResource]) -> Model {
    Model::serving(resources.iter().map(Kind::of))
}

/// The model's view of a stream's object; `None` when its type is not served.
pub fn object(model: &Model, object: &PartialObjectMeta) -> Option<model::Object> {
    let kind = model.served(&object.api_version, &object.kind)?;
    Some(model::Object::of(kind.clone(), object))
}

/// Creates a stream's object, as the API server would (nothing when its type is not served).
pub fn create(model: &mut Model, created: &PartialObjectMeta) {
    if let Some(created) = object(model, created) {
        model.apply(&model::Action::Create(created));
    }
}

/// Applies a script's action, without letting the collector run.
pub fn apply(model: &mut Model, action: &Action) {
    let action = match action {
        Action::Create(created) => return create(model, created),
        Action::Delete { target, policy } => model::Action::Delete {
            uid: target.uid.clone(),
            policy: Some(*policy),
        },
        Action::SetOwners { target, owners } => model::Action::SetOwnerReferences {
            uid: target.uid.clone(),
            owner_references: owners.clone(),
        },
    };
    model.apply(&action);
}

/// Objects read from a cluster, as the model's outcome describes them; those of types `model`
/// does not serve are left out.
pub fn outcome<'a>(model: &Model, objects: impl IntoIterator<Item = &'a PartialObjectMeta>) -> Outcome {
    model::outcome_of(objects.into_iter().filter_map(|o| object(model, o)))
}
