//! Benchmark of the record codec (driven by `scripts/bench-record`): encodes N demo-like records
//! (a 20000-sample complex64 IQ field with a time coordinate, box labels, a segmentation raster,
//! record metadata), writes the payloads to `DIR/records.lp` (length-prefixed) for the Python
//! side, then decodes every payload and touches every field's bytes. Best of 3 passes, process
//! CPU time. Prints one JSON line.

use std::io::Write;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sdsfs::format::dtype::DType;
use sdsfs::format::json::{Object, Value};
use sdsfs::format::limits::RecordLimits;
use sdsfs::format::record::{decode, encode, Axis, Coordinate, Field, Record};

const RECORDS: usize = 1000;
const REPS: usize = 3;

fn cpu_now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant libc supports.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn random_bytes(rng: &mut StdRng, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.gen()).collect()
}

fn record(rng: &mut StdRng, i: usize) -> Result<Record, Box<dyn std::error::Error>> {
    let mut metadata = Object::new();
    metadata.insert("snr_db".into(), Value::Float(rng.gen_range(0.0..30.0)));
    metadata.insert("index".into(), Value::from(i as u64));
    let iq =
        Field::new(DType::C64, vec![20000], random_bytes(rng, 160_000))?
            .with_axes(vec![Axis::new("time", 20000)
                .with_coordinate(Coordinate::regular(0.0, 1e-6).with_unit("s"))]);
    let boxes = Field::new(DType::F64, vec![2, 4], random_bytes(rng, 64))?
        .with_axes(vec![Axis::new("box", 2), Axis::new("extent", 4)]);
    let raster = Field::new(DType::I16, vec![64, 79], random_bytes(rng, 64 * 79 * 2))?
        .with_axes(vec![Axis::new("frequency", 64), Axis::new("time", 79)]);
    Ok(Record::new(format!("r{i}"))
        .with_scene_id(format!("s{}", i / 2))
        .with_metadata(metadata)
        .with_field("rx0/iq", iq)
        .with_field("labels/boxes/extent", boxes)
        .with_field("labels/segmentation", raster))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).ok_or("usage: bench_record DIR")?);
    let limits = RecordLimits::default();
    let mut rng = StdRng::seed_from_u64(7);
    let records = (0..RECORDS)
        .map(|i| record(&mut rng, i))
        .collect::<Result<Vec<_>, _>>()?;
    let mut encode_s = f64::INFINITY;
    let mut payloads = Vec::new();
    for _ in 0..REPS {
        let t = cpu_now();
        payloads = records
            .iter()
            .map(|r| encode(r, &limits))
            .collect::<Result<Vec<_>, _>>()?;
        encode_s = encode_s.min(cpu_now() - t);
    }
    let mut lp = std::io::BufWriter::new(std::fs::File::create(dir.join("records.lp"))?);
    for p in &payloads {
        lp.write_all(&(p.len() as u64).to_le_bytes())?;
        lp.write_all(p)?;
    }
    lp.flush()?;
    let shared: Vec<Bytes> = payloads.into_iter().map(Bytes::from).collect();
    let total: usize = shared.iter().map(Bytes::len).sum();
    let mut decode_s = f64::INFINITY;
    let mut checksum = 0u64;
    for _ in 0..REPS {
        checksum = 0;
        let t = cpu_now();
        for payload in &shared {
            let record = decode(payload.clone(), &limits)?;
            for field in record.fields.values() {
                // Touch the bytes the way a consumer would (a sum over the buffer).
                checksum =
                    checksum.wrapping_add(field.data.iter().map(|&b| u64::from(b)).sum::<u64>());
            }
        }
        decode_s = decode_s.min(cpu_now() - t);
    }
    println!(
        "{{\"records\":{RECORDS},\"bytes\":{total},\"encode_s\":{encode_s},\"decode_s\":{decode_s},\"checksum\":{checksum}}}"
    );
    Ok(())
}
