"""The shared parts of the DingTalk and WeCom robots' renderers: their markdown (escaping, safe
links, a reader's view) and an issue as message texts within a size limit."""
