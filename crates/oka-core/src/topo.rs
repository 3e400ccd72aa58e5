//! The dependency order of features (a depth-first topological sort), or the cycle
//! that prevents one.

use crate::feature::{Dependency, FeatureId};

/// Returns the nodes in dependency order, or one cycle.
pub(crate) fn topo_order(deps_of: &[Vec<Dependency>]) -> Result<Vec<FeatureId>, Vec<FeatureId>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    fn visit(
        n: FeatureId,
        deps_of: &[Vec<Dependency>],
        marks: &mut [Mark],
        stack: &mut Vec<FeatureId>,
        order: &mut Vec<FeatureId>,
    ) -> Result<(), Vec<FeatureId>> {
        match marks[n] {
            Mark::Done => return Ok(()),
            Mark::Active => {
                let start = stack.iter().position(|&x| x == n).unwrap_or(0);
                let mut cycle = stack[start..].to_vec();
                cycle.push(n);
                return Err(cycle);
            }
            Mark::New => {}
        }
        marks[n] = Mark::Active;
        stack.push(n);
        for d in &deps_of[n] {
            visit(d.feature, deps_of, marks, stack, order)?;
        }
        stack.pop();
        marks[n] = Mark::Done;
        order.push(n);
        Ok(())
    }
    let mut marks = vec![Mark::New; deps_of.len()];
    let mut order = Vec::with_capacity(deps_of.len());
    for n in 0..deps_of.len() {
        visit(n, deps_of, &mut marks, &mut Vec::new(), &mut order)?;
    }
    Ok(order)
}
