#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kube_gc_sim::fuzzing::sim_request(data));
