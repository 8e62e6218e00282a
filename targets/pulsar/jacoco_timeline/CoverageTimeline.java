// txnbench: which methods of some classes each JaCoCo dump reached, and the dumps merged.
// Run by targets/pulsar/coverage_report.py against org.jacoco.core (targets/pulsar/maven/jacoco/pom.xml).
//
// Reads a spec file (argument 1), one directive a line, tab-separated:
//   class <jar> <internal class name>     the class files analysed (e.g. org/apache/pulsar/X$Y)
//   part <exec file>                      a dump: prints the methods of those classes it reached
//   merge <out exec> <exec> <exec> ...    writes the union of the exec files to <out>
// and prints JSON lines: one {"inventory": ...} per class (its methods), one {"part": ...} per part.

import java.io.BufferedReader;
import java.io.File;
import java.io.FileReader;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.ZipFile;
import org.jacoco.core.analysis.Analyzer;
import org.jacoco.core.analysis.CoverageBuilder;
import org.jacoco.core.analysis.IClassCoverage;
import org.jacoco.core.analysis.IMethodCoverage;
import org.jacoco.core.data.ExecutionDataStore;
import org.jacoco.core.tools.ExecFileLoader;

public final class CoverageTimeline {
    private CoverageTimeline() {
    }

    private static String json(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    private static String methodKey(IClassCoverage cls, IMethodCoverage m) {
        return cls.getName() + "#" + m.getName() + "#" + m.getDesc();
    }

    public static void main(String[] args) throws IOException {
        Map<String, byte[]> classes = new LinkedHashMap<>();
        List<String> parts = new ArrayList<>();
        List<String[]> merges = new ArrayList<>();
        Map<String, ZipFile> jars = new LinkedHashMap<>();
        try (BufferedReader in = new BufferedReader(new FileReader(args[0]))) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] f = line.split("\t");
                if (f[0].equals("class")) {
                    ZipFile jar = jars.computeIfAbsent(f[1], p -> {
                        try {
                            return new ZipFile(p);
                        } catch (IOException e) {
                            throw new RuntimeException(e);
                        }
                    });
                    var entry = jar.getEntry(f[2] + ".class");
                    if (entry == null) {
                        continue;
                    }
                    try (InputStream s = jar.getInputStream(entry)) {
                        classes.put(f[2], s.readAllBytes());
                    }
                } else if (f[0].equals("part")) {
                    parts.add(f[1]);
                } else if (f[0].equals("merge")) {
                    merges.add(f);
                }
            }
        }
        // the methods each class has (with no data: what the release's classes hold)
        CoverageBuilder all = new CoverageBuilder();
        Analyzer inventory = new Analyzer(new ExecutionDataStore(), all);
        for (var e : classes.entrySet()) {
            inventory.analyzeClass(e.getValue(), e.getKey());
        }
        for (IClassCoverage cls : all.getClasses()) {
            StringBuilder out = new StringBuilder("{\"inventory\": " + json(cls.getName()) + ", \"methods\": [");
            boolean first = true;
            for (IMethodCoverage m : cls.getMethods()) {
                out.append(first ? "" : ", ").append(json(m.getName() + "#" + m.getDesc()));
                first = false;
            }
            System.out.println(out.append("]}"));
        }
        for (String part : parts) {
            ExecFileLoader loader = new ExecFileLoader();
            loader.load(new File(part));
            ExecutionDataStore store = loader.getExecutionDataStore();
            CoverageBuilder builder = new CoverageBuilder();
            Analyzer analyzer = new Analyzer(store, builder);
            for (var e : classes.entrySet()) {
                if (store.contains(e.getKey())) {
                    analyzer.analyzeClass(e.getValue(), e.getKey());
                }
            }
            StringBuilder out = new StringBuilder("{\"part\": " + json(part) + ", \"methods\": [");
            boolean first = true;
            for (IClassCoverage cls : builder.getClasses()) {
                for (IMethodCoverage m : cls.getMethods()) {
                    if (m.getInstructionCounter().getCoveredCount() > 0) {
                        out.append(first ? "" : ", ").append(json(methodKey(cls, m)));
                        first = false;
                    }
                }
            }
            System.out.println(out.append("]}"));
        }
        for (String[] merge : merges) {
            ExecFileLoader loader = new ExecFileLoader();
            for (int i = 2; i < merge.length; i++) {
                loader.load(new File(merge[i]));
            }
            loader.save(new File(merge[1]), false);
            System.out.println("{\"merged\": " + json(merge[1]) + ", \"from\": " + (merge.length - 2) + "}");
        }
        for (ZipFile jar : jars.values()) {
            jar.close();
        }
    }
}
