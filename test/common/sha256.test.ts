import { sha256, sha256Hex } from '../../src/common/sha256';

// FIPS 180-2's examples: the one-shot digest must be SHA-256 itself, of text as UTF-8 and of bytes alike.
const ABC = 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad';
const EMPTY = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

describe('sha256', () => {
  it('digests text as its UTF-8 bytes, to a 32-byte buffer', () => {
    const digest = sha256('abc');
    expect(Buffer.isBuffer(digest)).toBe(true);
    expect(digest.toString('hex')).toBe(ABC);
    expect(sha256('é').equals(sha256(Buffer.from([0xc3, 0xa9])))).toBe(true);
  });

  it('digests bytes, and the empty input', () => {
    expect(sha256(Buffer.from('abc')).toString('hex')).toBe(ABC);
    expect(sha256('').toString('hex')).toBe(EMPTY);
  });

  it('gives the same digest in hex', () => {
    expect(sha256Hex('abc')).toBe(ABC);
    expect(sha256Hex(Buffer.alloc(0))).toBe(EMPTY);
  });
});
