//! `sds demo OUT`: publishes the embedded demo dataset, a small RF dataset modeled on RFGen's
//! scene-observation records, deterministically (fixed seed; the same bytes on every run and
//! every platform).
//!
//! Why a generator rather than only a committed copy: the copy in `fixtures/demo/` is what the
//! README and the mount demo use, and a test regenerates it and compares every byte, so the
//! generator, the record codec, the ArrayRecord writer and publication are all pinned at once.
//! Why it lives in the `sds` binary: `scripts/demo` works from a release build alone.
//!
//! - [`signal`]: seeded generator, deterministic trigonometry, QPSK and 2-FSK bursts.
//! - [`scene`]: the four scenes and eight observations (scene-0002 seen by two receivers,
//!   scene-0003 labelled in absolute Hz).
//! - [`fields`]: the record's fields, axes, coordinates and time-coordinate blocks.
//! - here: record metadata (an `rfgen`-like envelope), content-derived record ids, shards and
//!   publication (3 shards, 2 shards per manifest page, so 2 pages).

pub mod fields;
pub mod scene;
pub mod signal;

use std::path::Path;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use self::fields::obj;
use self::scene::Observation;
use crate::dataset::{publish, write_shard, DatasetError, PublishOptions, PublishSummary};
use crate::dataset::{ShardOptions, ShardReceipt};
use crate::format::json::{to_compact, Object, Value};
use crate::format::record::{self, Record, RecordError};
use crate::storage::{LocalStore, ObjectStore};

pub const DATASET_ID: &str = "sds-demo";
pub const SNAPSHOT_ID: &str = "sds-demo-v1";
/// The seed every observation's noise derives from.
pub const SEED: u64 = 20_250_601;
/// Records per shard: 3 + 3 + 2.
const RECORDS_PER_SHARD: usize = 3;
const SHARDS_PER_MANIFEST: usize = 2;
/// Stands in for the record id while the content-derived id is computed (as RFGen does).
const ID_PLACEHOLDER: &str = "rfgen:identity-placeholder";

/// Why the demo could not be written.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("{0}")]
    Record(#[from] RecordError),
    #[error("{0}")]
    Dataset(#[from] DatasetError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The scene plan an observation was drawn from, and its content-bound reference
/// `scene-plan:<scene id>:<first 12 hex of SHA-256 of the plan>`.
fn scene_plan(observation: &Observation) -> (Object, String) {
    let s = &observation.scene;
    let emitters: Vec<Value> = s
        .emitters
        .iter()
        .map(|e| {
            obj(vec![
                ("modulation", e.modulation.name().into()),
                ("start_sample", (e.start_sample as u64).into()),
                ("duration_samples", (e.duration_samples as u64).into()),
                ("offset_hz", e.offset_hz.into()),
                ("symbol_seed", e.seed.into()),
            ])
            .into()
        })
        .collect();
    let radar = obj(vec![
        ("beat_hz", s.radar_beat_hz.into()),
        (
            "doppler_cycles_per_pulse",
            s.doppler_cycles_per_pulse.into(),
        ),
        ("pri_s", scene::PRI_S.into()),
    ]);
    let plan = obj(vec![
        ("scene_id", s.id.into()),
        ("epoch_s", scene::EPOCH_S.into()),
        ("emitters", emitters.into()),
        ("radar", radar.into()),
    ]);
    let hash = hex::encode(Sha256::digest(to_compact(&plan.clone().into()).as_bytes()));
    let reference = format!("scene-plan:{}:{}", s.id, &hash[..12]);
    (plan, reference)
}

/// Which projection owns each field, and which fields are primary or auxiliary.
fn field_roles(names: &[&str]) -> (Object, Vec<Value>, Vec<Value>) {
    let mut owners = Object::new();
    let (mut primary, mut auxiliary) = (Vec::new(), Vec::new());
    for name in names {
        let owner = if name.starts_with("projections/radar_rx/") {
            "radar_rx"
        } else {
            "communications_rx"
        };
        owners.insert((*name).into(), owner.into());
        if name.contains("/coordinates/") || name.starts_with("provenance/") {
            auxiliary.push((*name).into());
        } else {
            primary.push((*name).into());
        }
    }
    (owners, primary, auxiliary)
}

fn projections() -> Object {
    let projection = |selector: &str, implementation: &str| -> Value {
        obj(vec![
            ("selector", selector.into()),
            ("contract_version", "1".into()),
            ("implementation", implementation.into()),
        ])
        .into()
    };
    obj(vec![
        (
            "communications_rx",
            projection("receiver.iq+labels", "sds-demo.bursts"),
        ),
        ("radar_rx", projection("radar.pulsed", "sds-demo.beat-tone")),
    ])
}

/// The record metadata: an `rfgen`-like envelope plus a small scene summary.
fn record_metadata(observation: &Observation, names: &[&str]) -> Object {
    let (plan, reference) = scene_plan(observation);
    let (owners, primary, auxiliary) = field_roles(names);
    let seeds = obj(vec![
        ("communications_rx", observation.sample_seed.into()),
        ("radar_rx", (observation.sample_seed ^ 0x5eed_0000).into()),
    ]);
    let invocation = obj(vec![
        ("sample_ordinal", observation.ordinal.into()),
        ("sample_seed", observation.sample_seed.into()),
        ("projection_seeds", seeds.into()),
    ]);
    let envelope = obj(vec![
        ("envelope_schema", "rfgen.scene_observation.v1".into()),
        ("record_type", "scene_observation".into()),
        ("record_schema_version", 1u64.into()),
        (
            "observation_id",
            format!("{}/obs-{}", observation.scene.id, observation.ordinal % 2).into(),
        ),
        (
            "scene_plan",
            obj(vec![
                ("reference", reference.into()),
                ("payload", plan.into()),
            ])
            .into(),
        ),
        ("projections", projections().into()),
        ("field_owners", owners.into()),
        ("primary_fields", primary.into()),
        ("auxiliary_fields", auxiliary.into()),
        ("invocation", invocation.into()),
    ]);
    let summary = obj(vec![
        ("realized_snr_db", observation.snr_db.into()),
        ("receiver_center_hz", scene::RECEIVER_CENTER_HZ.into()),
        (
            "emitter_count",
            (observation.scene.emitters.len() as u64).into(),
        ),
    ]);
    obj(vec![("rfgen", envelope.into()), ("scene", summary.into())])
}

/// The record of one observation, its id derived from its own encoding.
pub fn observation_record(observation: &Observation) -> Result<Record, RecordError> {
    let (_, reference) = scene_plan(observation);
    let fields = fields::all(observation, &reference)?;
    let names: Vec<&str> = fields.iter().map(|(name, _)| *name).collect();
    let mut record = Record::new(ID_PLACEHOLDER)
        .with_scene_id(observation.scene.id)
        .with_metadata(record_metadata(observation, &names));
    for (name, field) in fields {
        record = record.with_field(name, field);
    }
    let encoded = record::encode(&record, &Default::default())?;
    record.id = format!("obs-{}", &hex::encode(Sha256::digest(&encoded))[..20]);
    Ok(record)
}

/// The demo's records, in ordinal order.
pub fn demo_records() -> Result<Vec<Record>, RecordError> {
    scene::observations(SEED)
        .iter()
        .map(observation_record)
        .collect()
}

/// The publication's metadata (root only).
fn publication_metadata(work_ids: &[String]) -> Object {
    let ids: Vec<Value> = work_ids.iter().map(|w| w.as_str().into()).collect();
    obj(vec![
        ("generator", "sds demo".into()),
        ("seed", SEED.into()),
        (
            "description",
            "Demo RF dataset: 4 scenes x 2 observations; 1 MHz receiver IQ with QPSK/2-FSK bursts (scene-0002 also at 2 MHz on a second receiver), box labels (scene-0003's in absolute Hz) and segmentation labels, pulsed radar".into(),
        ),
        ("rfgen_expected_work_ids", ids.into()),
    ])
}

/// Publishes the demo dataset into the directory `out` (created if missing). Re-running into
/// the same directory converges on the same bytes; a different dataset there is a collision
/// error.
pub fn write_demo(out: &Path) -> Result<PublishSummary, DemoError> {
    std::fs::create_dir_all(out).map_err(|source| DemoError::Io {
        path: out.display().to_string(),
        source,
    })?;
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(out).map_err(DatasetError::from)?);
    write_demo_into(store.as_ref())
}

/// Publishes the demo dataset into `store` (a local directory, a bucket prefix), as
/// [`write_demo`] does.
pub fn write_demo_into(store: &dyn ObjectStore) -> Result<PublishSummary, DemoError> {
    let records = demo_records()?;
    let mut receipts: Vec<ShardReceipt> = Vec::new();
    for (index, chunk) in records.chunks(RECORDS_PER_SHARD).enumerate() {
        // `sds create`'s and the library's materialize scheme: the first position, `%012d`,
        // so that `sds create` over a copy of the demo reproduces it byte for byte.
        let work_id = format!("{:012}", index * RECORDS_PER_SHARD);
        let receipt = write_shard(
            store,
            chunk.iter().cloned(),
            &work_id,
            0,
            &ShardOptions::default(),
        )?;
        receipts.push(receipt);
    }
    let work_ids: Vec<String> = receipts.iter().map(|r| r.work_id.clone()).collect();
    let mut options = PublishOptions::new(DATASET_ID, SNAPSHOT_ID);
    options.metadata = publication_metadata(&work_ids);
    options.expected_work_ids = Some(work_ids);
    options.shards_per_manifest = SHARDS_PER_MANIFEST;
    Ok(publish(store, &receipts, &options)?)
}
