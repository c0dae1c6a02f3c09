// The Boat commands' suite (boats-suite.ts) on the default backend, file (today's JSON files).
import { boatsSuite } from "./boats-suite.js";

boatsSuite("file");
