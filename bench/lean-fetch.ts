// The load generator's transport: node:http over keep-alive sockets instead of the global fetch
// (undici), which cost the bench process ~1 ms of CPU per request on the two cores the service
// and Postgres also run on. pgbench's client is C; this keeps ours from being the bottleneck. The
// SDK still builds and signs every request (ClientOptions.fetch).
import http from 'node:http';

const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });

interface Init {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
}

export const leanFetch = ((url: string, init: Init = {}) =>
  new Promise((resolve, reject) => {
    const body = init.body === undefined ? undefined : Buffer.from(init.body);
    const headers = { ...init.headers, ...(body ? { 'content-length': String(body.length) } : {}) };
    const req = http.request(url, { method: init.method ?? 'GET', headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const status = res.statusCode ?? 0;
        resolve({
          ok: status >= 200 && status < 300,
          status,
          text: async () => text,
          headers: { get: (name: string) => [res.headers[name.toLowerCase()]].flat()[0] ?? null },
        });
      });
    });
    req.on('error', reject);
    req.end(body);
  })) as unknown as typeof fetch;
