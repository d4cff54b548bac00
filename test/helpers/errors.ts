// The SvcError a call fails with; fails the test (by throwing) when the call succeeds instead.
import { SvcError } from '@svc-mail/sdk';

export async function errorOf(p: Promise<unknown>): Promise<SvcError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof SvcError) return err;
    throw err;
  }
  throw new Error('expected the call to fail, it succeeded');
}
