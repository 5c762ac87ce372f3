import { describeReport, fuzz } from './fuzzer';
import { startFuzzTarget } from './target';

/** CI's fixed seed; `npm run fuzz -- --seed S --seconds N` explores further. */
const SEED = Number(process.env.FUZZ_SEED ?? 20261121);
const SECONDS = Number(process.env.FUZZ_SECONDS ?? 60);

it(`answers ${SECONDS} s of random and malformed requests on every surface without a fault (seed ${SEED})`, async () => {
  const { target, stop } = await startFuzzTarget();
  try {
    const report = await fuzz(target, { seed: SEED, seconds: SECONDS });
    process.stdout.write(`${describeReport(report)}\n`);
    expect(report.failure).toBeUndefined();
    // The run reached every kind of surface.
    expect(report.requests).toBeGreaterThan(SECONDS * 20);
    expect(Object.keys(report.webSocketCloses).length).toBeGreaterThan(0);
  } finally {
    await stop();
  }
}, (SECONDS + 120) * 1000);
