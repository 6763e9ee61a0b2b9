/**
 * What an ELF64 little-endian executable or shared library needs from the dynamic loader: its
 * interpreter (PT_INTERP) and the shared libraries it names (DT_NEEDED). Enough to collect the
 * libraries of the image's `node` from Debian packages without running `ldd` on the build host.
 */

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const PT_INTERP = 3;
const DT_NULL = 0n;
const DT_NEEDED = 1n;
const DT_STRTAB = 5n;

export interface ElfDeps {
  /** The program interpreter, e.g. /lib64/ld-linux-x86-64.so.2 (executables only). */
  interpreter?: string;
  /** DT_NEEDED sonames in the order the file lists them. */
  needed: string[];
  machine: number;
}

/** x86-64 in e_machine. */
export const EM_X86_64 = 62;

function cString(buf: Uint8Array, offset: number): string {
  let end = offset;
  while (end < buf.length && buf[end] !== 0) end++;
  return new TextDecoder().decode(buf.subarray(offset, end));
}

export function elfDeps(file: Uint8Array): ElfDeps {
  if (file.length < 64 || file[0] !== 0x7f || file[1] !== 0x45 || file[2] !== 0x4c || file[3] !== 0x46) {
    throw new Error('not an ELF file');
  }
  if (file[4] !== 2 || file[5] !== 1) throw new Error('only 64-bit little-endian ELF files are supported');
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  const machine = view.getUint16(18, true);
  const phoff = Number(view.getBigUint64(32, true));
  const phentsize = view.getUint16(54, true);
  const phnum = view.getUint16(56, true);
  const segments: { type: number; offset: number; vaddr: bigint; filesz: number }[] = [];
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    if (at + 56 > file.length) throw new Error('truncated program header table');
    segments.push({
      type: view.getUint32(at, true),
      offset: Number(view.getBigUint64(at + 8, true)),
      vaddr: view.getBigUint64(at + 16, true),
      filesz: Number(view.getBigUint64(at + 32, true)),
    });
  }
  const out: ElfDeps = { needed: [], machine };
  const interp = segments.find((s) => s.type === PT_INTERP);
  if (interp) out.interpreter = cString(file.subarray(interp.offset, interp.offset + interp.filesz), 0);
  const dyn = segments.find((s) => s.type === PT_DYNAMIC);
  if (!dyn) return out;
  const entries: [bigint, bigint][] = [];
  for (let at = dyn.offset; at + 16 <= dyn.offset + dyn.filesz; at += 16) {
    const tag = view.getBigInt64(at, true);
    if (tag === DT_NULL) break;
    entries.push([tag, view.getBigUint64(at + 8, true)]);
  }
  const strtabAddr = entries.find(([t]) => t === DT_STRTAB)?.[1];
  if (strtabAddr === undefined) throw new Error('dynamic section without DT_STRTAB');
  // DT_STRTAB is a virtual address: find the loaded segment that holds it.
  const load = segments.find(
    (s) => s.type === PT_LOAD && s.vaddr <= strtabAddr && strtabAddr < s.vaddr + BigInt(s.filesz),
  );
  if (!load) throw new Error('DT_STRTAB outside every PT_LOAD segment');
  const strtab = load.offset + Number(strtabAddr - load.vaddr);
  for (const [tag, val] of entries) {
    if (tag === DT_NEEDED) out.needed.push(cString(file, strtab + Number(val)));
  }
  return out;
}
