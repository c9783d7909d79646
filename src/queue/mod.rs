//! De-duplicating, rate-limited work queues (spec §7.1).
