//! The groups of `benches/tower.rs`: the tower layers (`layer`), the async and owned-permit
//! calls (`calls`), the services they call (`stacks`), and how they are driven without a
//! runtime (`exec`).

pub(crate) mod budget;
pub(crate) mod calls;
pub(crate) mod exec;
pub(crate) mod layer;
pub(crate) mod stacks;
