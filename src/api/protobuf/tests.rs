use super::*;
use proptest::prelude::*;

fn meta() -> ObjectMeta {
    ObjectMeta {
        name: "web-1".into(),
        generate_name: "web-".into(),
        namespace: "shop".into(),
        uid: "52224327-8725-4086-8a48-4a297f840ed5".into(),
        resource_version: "4512".into(),
        generation: Some(3),
        creation_timestamp: Some("2026-01-01T00:00:00Z".into()),
        deletion_timestamp: Some("2026-01-01T00:00:01Z".into()),
        deletion_grace_period_seconds: Some(-1),
        labels: BTreeMap::from([("app".into(), "web".into())]),
        annotations: BTreeMap::from([("a".into(), "b".into()), (INITIAL_EVENTS_END.into(), "true".into())]),
        owner_references: vec![
            OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "web".into(),
                uid: "d215481d-a37b-4297-915f-0a112fe3a8b2".into(),
                controller: Some(true),
                block_owner_deletion: Some(false),
            },
            OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "c".into(),
                uid: "u".into(),
                ..OwnerReference::default()
            },
        ],
        finalizers: vec!["orphan".into(), "example.com/hold".into()],
    }
}

#[test]
fn an_object_should_read_back_as_written() {
    let managed = serde_json::json!([{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
        "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]);
    let body = encode_object(&meta(), Some(&managed));
    assert!(body.starts_with(MAGIC));
    assert_eq!(decode_object(&body).unwrap().metadata, meta());
}

/// The bytes of a small object, assembled by hand from the field numbers of the `.proto` files,
/// so that the encoder and the decoder cannot agree on a wrong number between themselves.
#[test]
fn an_object_should_be_the_bytes_the_proto_files_define() {
    let meta = ObjectMeta {
        name: "a".into(),
        uid: "u".into(),
        owner_references: vec![OwnerReference {
            api_version: "v1".into(),
            kind: "K".into(),
            name: "o".into(),
            uid: "w".into(),
            controller: Some(true),
            block_owner_deletion: None,
        }],
        finalizers: vec!["f".into()],
        ..ObjectMeta::default()
    };
    #[rustfmt::skip]
    let owner = [0x0a, 1, b'K', 0x1a, 1, b'o', 0x22, 1, b'w', 0x2a, 2, b'v', b'1', 0x30, 1];
    let mut object_meta = vec![0x0a, 1, b'a', 0x2a, 1, b'u', 0x6a, owner.len() as u8];
    object_meta.extend_from_slice(&owner);
    object_meta.extend_from_slice(&[0x72, 1, b'f']);
    let mut partial = vec![0x0a, object_meta.len() as u8];
    partial.extend_from_slice(&object_meta);
    let type_meta = [
        &[0x0a, 14][..],
        b"meta.k8s.io/v1",
        &[0x12, 21],
        b"PartialObjectMetadata",
    ]
    .concat();
    let mut expected = b"k8s\0".to_vec();
    expected.extend_from_slice(&[0x0a, type_meta.len() as u8]);
    expected.extend_from_slice(&type_meta);
    expected.extend_from_slice(&[0x12, partial.len() as u8]);
    expected.extend_from_slice(&partial);
    assert_eq!(encode_object(&meta, None), expected);
}

#[test]
fn a_list_should_read_back_its_items_and_where_it_stands() {
    let mut second = meta();
    second.name = "web-2".into();
    let start = ListMeta {
        resource_version: "90".into(),
        continue_token: "eyJydiI6OTB9".into(),
        remaining_item_count: Some(7),
    };
    let body = encode_list([(&meta(), None), (&second, None)], &start);
    let (items, read) = decode_list(&body).unwrap();
    assert_eq!(read, start);
    assert_eq!(
        items.iter().map(|o| &o.metadata).collect::<Vec<_>>(),
        [&meta(), &second]
    );
    let (empty, _) = decode_list(&encode_list([], &ListMeta::default())).unwrap();
    assert!(empty.is_empty());
}

#[test]
fn a_watch_event_should_keep_what_the_collector_reads() {
    let frame = encode_watch_event("MODIFIED", &encode_object(&meta(), None));
    let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
    assert_eq!(len, frame.len() - 4);
    let Frame::Event(event_type, object) = decode_watch_event(&frame[4..]).unwrap() else {
        panic!("not an event");
    };
    assert_eq!(event_type, WatchEventType::Modified);
    let expected = ObjectMeta {
        generate_name: String::new(),
        generation: None,
        creation_timestamp: None,
        deletion_grace_period_seconds: None,
        labels: BTreeMap::new(),
        annotations: BTreeMap::from([(INITIAL_EVENTS_END.into(), "true".into())]),
        ..meta()
    };
    assert_eq!(object.metadata, expected);
}

#[test]
fn an_error_event_should_be_the_servers_status() {
    let status = ::kube::core::Status {
        status: Some(::kube::core::response::StatusSummary::Failure),
        code: 410,
        message: "too old resource version: 1 (2)".into(),
        reason: "Expired".into(),
        metadata: None,
        details: None,
    };
    let frame = encode_watch_event("ERROR", &encode_status(&status));
    let Frame::Error(read) = decode_watch_event(&frame[4..]).unwrap() else {
        panic!("not an error");
    };
    assert_eq!(*read, status);
}

#[test]
fn a_status_should_read_back_with_its_details() {
    let status = ::kube::core::Status {
        status: Some(::kube::core::response::StatusSummary::Failure),
        code: 429,
        message: "slow down".into(),
        reason: "TooManyRequests".into(),
        metadata: None,
        details: Some(::kube::core::response::StatusDetails {
            name: "p".into(),
            group: "apps".into(),
            kind: "deployments".into(),
            uid: "u".into(),
            causes: vec![::kube::core::response::StatusCause {
                reason: "FieldValueInvalid".into(),
                message: "bad".into(),
                field: "metadata.name".into(),
            }],
            retry_after_seconds: 1,
        }),
    };
    assert_eq!(decode_status(&encode_status(&status)).unwrap(), status);
}

#[test]
fn go_s_zero_time_should_read_as_no_time() {
    let mut w = Writer { buf: MAGIC.to_vec() };
    w.message(2, |w| w.message(1, |w| w.message(8, |w| w.int(1, GO_ZERO_TIME))));
    assert_eq!(decode_object(&w.buf).unwrap().metadata.creation_timestamp, None);
}

#[test]
fn fields_the_module_does_not_know_should_be_skipped() {
    let mut w = Writer { buf: MAGIC.to_vec() };
    w.message(2, |w| {
        w.int(9, 5);
        w.message(1, |w| {
            w.string(1, "a");
            w.int(99, 1);
            w.key(98, FIXED32);
            w.buf.extend_from_slice(&[0; 4]);
            w.key(97, FIXED64);
            w.buf.extend_from_slice(&[0; 8]);
            w.string(4, "/api/v1/self-link");
            w.string(5, "u");
        });
    });
    let meta = decode_object(&w.buf).unwrap().metadata;
    assert_eq!((meta.name.as_str(), meta.uid.as_str()), ("a", "u"));
}

#[test]
fn a_broken_body_should_be_an_error() {
    assert!(decode_object(b"{\"kind\":\"Status\"}").is_err());
    assert!(decode_object(b"k8s").is_err());
    // A length far past the end, a varint of eleven bytes, wire type 7.
    assert!(decode_object(&[b'k', b'8', b's', 0, 0x12, 0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
    assert!(decode_object(&[&MAGIC[..], &[0x10], &[0xff; 10], &[0x01]].concat()).is_err());
    assert!(decode_object(&[&MAGIC[..], &[0x0f, 0]].concat()).is_err());
    assert!(decode_watch_event(&encode_object(&meta(), None)).is_err());
    // Every cut of a valid body is read or refused, never a panic.
    let body = encode_list([(&meta(), None)], &ListMeta::default());
    for end in 0..body.len() {
        let _ = decode_list(&body[..end]);
    }
}

proptest! {
    #[test]
    fn no_bytes_should_panic_a_decoder(tail in proptest::collection::vec(any::<u8>(), 0..256)) {
        let body = [&MAGIC[..], &tail].concat();
        let _ = decode_object(&body);
        let _ = decode_list(&body);
        let _ = decode_watch_event(&body);
        let _ = decode_status(&body);
    }
}
