import java.util.Locale;

import org.slf4j.ILoggerFactory;
import org.slf4j.IMarkerFactory;
import org.slf4j.Marker;
import org.slf4j.event.Level;
import org.slf4j.helpers.BasicMarkerFactory;
import org.slf4j.helpers.LegacyAbstractLogger;
import org.slf4j.helpers.MessageFormatter;
import org.slf4j.helpers.NOPMDCAdapter;
import org.slf4j.spi.MDCAdapter;
import org.slf4j.spi.SLF4JServiceProvider;

/**
 * An SLF4J provider that prints the Kafka client's own log lines to stderr (with the
 * milliseconds since logging started), so a test that fails shows what the client
 * complained about (unsupported versions, retried errors) and when.
 * Chosen with {@code -Dslf4j.provider=StderrSlf4j}; the threshold is
 * {@code -Dmoldau.java.log=WARN} (TRACE, DEBUG, INFO, WARN, ERROR).
 */
public final class StderrSlf4j implements SLF4JServiceProvider {
    private static final long START = System.nanoTime();
    private static final Level THRESHOLD =
            Level.valueOf(System.getProperty("moldau.java.log", "WARN").toUpperCase(Locale.ROOT));

    private final ILoggerFactory loggers = StderrLogger::new;
    private final IMarkerFactory markers = new BasicMarkerFactory();
    private final MDCAdapter mdc = new NOPMDCAdapter();

    @Override
    public ILoggerFactory getLoggerFactory() {
        return loggers;
    }

    @Override
    public IMarkerFactory getMarkerFactory() {
        return markers;
    }

    @Override
    public MDCAdapter getMDCAdapter() {
        return mdc;
    }

    @Override
    public String getRequestedApiVersion() {
        return "2.0.99";
    }

    @Override
    public void initialize() {}

    /** Levels compare by their int: TRACE=0 ... ERROR=40. */
    private static boolean enabled(Level level) {
        return level.toInt() >= THRESHOLD.toInt();
    }

    static final class StderrLogger extends LegacyAbstractLogger {
        private static final long serialVersionUID = 1L;
        private final String shortName;

        StderrLogger(String name) {
            this.name = name;
            this.shortName = name.substring(name.lastIndexOf('.') + 1);
        }

        @Override
        public boolean isTraceEnabled() {
            return enabled(Level.TRACE);
        }

        @Override
        public boolean isDebugEnabled() {
            return enabled(Level.DEBUG);
        }

        @Override
        public boolean isInfoEnabled() {
            return enabled(Level.INFO);
        }

        @Override
        public boolean isWarnEnabled() {
            return enabled(Level.WARN);
        }

        @Override
        public boolean isErrorEnabled() {
            return enabled(Level.ERROR);
        }

        @Override
        protected String getFullyQualifiedCallerName() {
            return null;
        }

        @Override
        protected void handleNormalizedLoggingCall(
                Level level, Marker marker, String pattern, Object[] args, Throwable thrown) {
            StringBuilder line = new StringBuilder()
                    .append((System.nanoTime() - START) / 1_000_000).append(" ms [").append(level).append("] ")
                    .append(Thread.currentThread().getName()).append(' ')
                    .append(shortName).append(": ")
                    .append(MessageFormatter.basicArrayFormat(pattern, args));
            if (thrown != null) {
                line.append(" (").append(thrown).append(')');
            }
            System.err.println(line);
        }
    }
}
