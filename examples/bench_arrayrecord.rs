//! Benchmark of our ArrayRecord writer/reader (driven by `scripts/bench-arrayrecord`).
//!
//! `bench_arrayrecord DIR`: for each dataset, writes the records to `DIR/NAME.lp`
//! (length-prefixed, for the Python side) and to `DIR/NAME.arrayrecord` with default options,
//! then reads the file sequentially and in a shuffled order (best of 3 passes each, in process CPU time). Prints one
//! JSON line per dataset.

use std::io::Write;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use sdsfs::arrayrecord::{ArrayRecordReader, ArrayRecordWriter, WriterOptions};

/// Complex int16 IQ samples of a noisy tone: realistic, moderately compressible.
fn iq_record(rng: &mut StdRng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let step: f32 = rng.gen_range(0.01..0.2);
    let mut t: f32 = 0.0;
    while out.len() < len {
        t += step;
        let i = (t.cos() * 1500.0) as i16 + rng.gen_range(-40..40);
        let q = (t.sin() * 1500.0) as i16 + rng.gen_range(-40..40);
        out.extend_from_slice(&i.to_le_bytes());
        out.extend_from_slice(&q.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Timed passes per read mode; the fastest counts.
const REPS: usize = 3;

/// CPU time of this process, in seconds: read passes are timed with it so that other load on
/// the (shared) machine disturbs the comparison less than with wall time.
fn cpu_now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant libc supports.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: bench_arrayrecord DIR")?,
    );
    let mut rng = StdRng::seed_from_u64(1);
    for (name, count, size) in [("iq64k", 2000usize, 64 << 10), ("iq8m", 20, 8 << 20)] {
        let records: Vec<Vec<u8>> = (0..count).map(|_| iq_record(&mut rng, size)).collect();
        let mut lp =
            std::io::BufWriter::new(std::fs::File::create(dir.join(format!("{name}.lp")))?);
        for r in &records {
            lp.write_all(&(r.len() as u64).to_le_bytes())?;
            lp.write_all(r)?;
        }
        lp.flush()?;
        let path = dir.join(format!("{name}.arrayrecord"));
        let t = Instant::now();
        let file = std::io::BufWriter::new(std::fs::File::create(&path)?);
        let mut w = ArrayRecordWriter::new(file, WriterOptions::default())?;
        for r in &records {
            w.write(r)?;
        }
        w.finish()?
            .into_inner()
            .map_err(|e| e.into_error())?
            .sync_all()?;
        let write_s = t.elapsed().as_secs_f64();

        let reader = ArrayRecordReader::open(std::fs::File::open(&path)?, name)?;
        let mut order: Vec<u64> = (0..reader.len()).collect();
        order.shuffle(&mut rng);
        // Best of REPS passes in CPU time: the machine is shared, the minimum is the least
        // disturbed.
        let (mut seq_s, mut rand_s) = (f64::MAX, f64::MAX);
        for _ in 0..REPS {
            let t = cpu_now();
            for i in 0..reader.len() {
                std::hint::black_box(reader.read(i)?);
            }
            seq_s = seq_s.min(cpu_now() - t);
            let t = cpu_now();
            for &i in &order {
                std::hint::black_box(reader.read(i)?);
            }
            rand_s = rand_s.min(cpu_now() - t);
        }
        // The bounded-memory path, sequentially into a sink.
        let mut stream_s = f64::MAX;
        for _ in 0..REPS {
            let t = cpu_now();
            for i in 0..reader.len() {
                reader.read_into(i, &mut std::io::sink())?;
            }
            stream_s = stream_s.min(cpu_now() - t);
        }
        let bytes = (count * size) as u64;
        println!(
            "{{\"dataset\":\"{name}\",\"impl\":\"rust\",\"bytes\":{bytes},\"write_s\":{write_s},\"seq_s\":{seq_s},\"rand_s\":{rand_s},\"stream_s\":{stream_s}}}"
        );
    }
    Ok(())
}
