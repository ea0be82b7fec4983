//! Mango selectors, sorting and the planner: arrives with the Mango issue.
