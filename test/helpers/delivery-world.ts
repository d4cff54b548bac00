// The world a delivery test sends into: a real DNS zone whose dest.test has an MX on 127.0.0.1, a real SMTP sink on
// loopback standing for that MX, and (deliveryWorld) a service whose MTA resolves through the zone and connects to the
// sink's port.
//
//   const { zone, sink, svc } = await deliveryWorld(t, { env: { SVC_RETRY_DELAYS: '1h' } });
//   const s = await sender(svc);
//   ... send to bob@dest.test, then read sink.messages
//
// A test whose recipients are on domains of its own adds their records to `zone` (the MTA looks them up when it
// delivers, so after the start is soon enough), the sink answering for every MX on 127.0.0.1.
import { startDnsZone, type DnsZone } from './dns-zone.js';
import { startTestService, type TestService, type TestServiceOptions } from './service.js';
import { startSmtpSink, type SinkOptions, type SmtpSink } from './smtp-sink.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface Destination {
  zone: DnsZone;
  sink: SmtpSink;
}

/** The zone and the sink, dest.test's MX pointing at the sink's address; both stopped in t.teardown. */
export async function startDestination(t: Teardown, sink: SinkOptions = {}): Promise<Destination> {
  const zone = await startDnsZone(t);
  zone.mx('dest.test', 10, 'mx.dest.test').a('mx.dest.test', '127.0.0.1');
  return { zone, sink: await startSmtpSink(t, sink) };
}

export interface DeliveryWorld extends Destination {
  svc: TestService;
}

/**
 * A destination and an in-process service delivering to it. The MTA runs and polls every 20 ms unless `mta` says
 * otherwise; `env` adds to (or overrides) the destination's settings.
 */
export async function deliveryWorld(
  t: Teardown,
  opts: TestServiceOptions & { sink?: SinkOptions } = {},
): Promise<DeliveryWorld> {
  const { sink: sinkOptions, env, mta, ...rest } = opts;
  const d = await startDestination(t, sinkOptions);
  // The MTA resolves through the zone and connects to the sink's port.
  const delivering = { SVC_DNS_SERVERS: d.zone.hostPort, SVC_OUTBOUND_PORT: String(d.sink.port) };
  const svc = await startTestService(t, { ...rest, mta: mta ?? { pollMs: 20 }, env: { ...delivering, ...env } });
  return { ...d, svc };
}
