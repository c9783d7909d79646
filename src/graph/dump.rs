//! DOT and JSON dumps of the graph (spec §8).
