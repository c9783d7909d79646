#![no_main]

// One input, both readers: the collector's watch decoder, and loadgen's reader of stream files
// (JSON Lines, or kubectl's concatenated indented JSON).
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kube_gc::fuzzing::watch_events(data);
    loadgen::stream::fuzzing::read(data);
});
