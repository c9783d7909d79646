#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kube_gc::fuzzing::graph_event(data));
