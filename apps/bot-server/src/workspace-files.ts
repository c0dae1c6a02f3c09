import { lstatSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { writeFileAtomic } from "@drydock/json-journal";

/** Why a workspace path was refused; the server answers 400 with this text. */
export class WorkspacePathError extends Error {
  override readonly name = "WorkspacePathError";
  readonly status = 400;
  readonly code = "invalid_path";
}

export class WorkspaceFileNotFound extends Error {
  override readonly name = "WorkspaceFileNotFound";
  readonly status = 404;
  readonly code = "file_not_found";
}

const MAX_PATH_LENGTH = 1024;
const MAX_SEGMENT_LENGTH = 255;

/**
 * Turns a client-supplied relative path into a checked path inside `root`. Refused: empty, absolute,
 * backslashes (a Windows separator smuggled past a POSIX check), NUL and control characters, `.`/`..`
 * segments, empty segments, and over-long paths. Symlinks are checked separately, on disk, by
 * `assertNoSymlinkEscape`, because a lexical check cannot see them.
 */
export function checkRelativePath(path: string): string[] {
  if (path.length === 0) throw new WorkspacePathError("The file path is empty.");
  if (path.length > MAX_PATH_LENGTH)
    throw new WorkspacePathError(`The file path is longer than ${MAX_PATH_LENGTH} characters.`);
  if (path.startsWith("/"))
    throw new WorkspacePathError("The file path must be relative to the workspace, not absolute.");
  if (path.includes("\\")) throw new WorkspacePathError("The file path must use forward slashes only.");
  if (/[\u0000-\u001f\u007f]/.test(path))
    throw new WorkspacePathError("The file path contains a control character.");
  const segments = path.split("/");
  for (const s of segments) {
    if (s === "" || s === "." || s === "..") {
      throw new WorkspacePathError("The file path may not contain empty, '.' or '..' segments.");
    }
    if (s.length > MAX_SEGMENT_LENGTH)
      throw new WorkspacePathError("A segment of the file path is too long.");
  }
  return segments;
}

/**
 * Every existing component between the workspace root and the target must be a real directory (or, for
 * the last one, a regular file): a symlink anywhere could point outside the workspace, so it is refused
 * rather than followed.
 */
function assertNoSymlinkEscape(root: string, segments: string[]): void {
  let current = root;
  for (let i = 0; i < segments.length; i++) {
    current = join(current, segments[i] as string);
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(current);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
      throw error;
    }
    if (st.isSymbolicLink())
      throw new WorkspacePathError("The file path goes through a symbolic link; links are not followed.");
    const last = i === segments.length - 1;
    if (!last && !st.isDirectory())
      throw new WorkspacePathError("A parent of the file path is not a directory.");
    if (last && !st.isFile() && !st.isDirectory())
      throw new WorkspacePathError("The file path names something that is not a regular file.");
  }
}

export interface WorkspaceFiles {
  read(path: string): Buffer;
  write(path: string, data: Buffer): { bytes: number };
  remove(path: string): void;
}

export function workspaceFiles(root: string): WorkspaceFiles {
  const resolveChecked = (path: string) => {
    const segments = checkRelativePath(path);
    mkdirSync(root, { recursive: true, mode: 0o700 });
    assertNoSymlinkEscape(root, segments);
    return join(root, ...segments);
  };
  return {
    read(path) {
      const target = resolveChecked(path);
      try {
        const st = lstatSync(target);
        if (!st.isFile()) throw new WorkspaceFileNotFound(`No file at '${path}' in this workspace.`);
        return readFileSync(target);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT")
          throw new WorkspaceFileNotFound(`No file at '${path}' in this workspace.`);
        throw error;
      }
    },
    write(path, data) {
      const target = resolveChecked(path);
      mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
      // Re-check after creating parents: a concurrent writer could have put a link there meanwhile.
      assertNoSymlinkEscape(root, checkRelativePath(path));
      writeFileAtomic(target, data, { mode: 0o600 });
      return { bytes: data.length };
    },
    remove(path) {
      const target = resolveChecked(path);
      try {
        const st = lstatSync(target);
        if (!st.isFile()) throw new WorkspacePathError("Only files can be deleted through this route.");
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT")
          throw new WorkspaceFileNotFound(`No file at '${path}' in this workspace.`);
        throw error;
      }
      rmSync(target);
    },
  };
}
